"""Shared predicates of the schema layer: plain records and arrays, JSON numbers, paths.

What counts as a plain value, in Python terms (R-VAL, R-DSL):

- a *plain record* is exactly ``dict`` (or our ``FrozenDict``); any other ``Mapping`` or
  ``dict`` subclass plays the part of a forged prototype;
- a *schema record* is a plain record whose keys are all ``str`` (non-``str`` keys play the
  part of symbol keys);
- a *plain array* is exactly ``list`` (or our ``FrozenList``); tuples and ``list``
  subclasses play the part of exotic or subclassed arrays;
- a JSON number is an ``int`` (any size, never ``bool``) or a finite ``float`` other than
  ``-0.0``; an integral ``float`` is an integer.
"""

from __future__ import annotations

import math
from typing import Any, Final

from toolray._json import FrozenDict, FrozenList, is_json

__all__ = (
    "ANNOTATION_KEYWORDS",
    "SCALAR_TYPES",
    "SCHEMA_TYPES",
    "LazyPath",
    "diagnostic_path",
    "is_json_integer",
    "is_json_number",
    "is_lossless",
    "is_plain_array",
    "is_plain_record",
    "is_schema_record",
    "property_path",
    "scalar_matches",
)

SCHEMA_TYPES: Final = ("object", "array", "string", "number", "integer", "boolean", "null")
SCALAR_TYPES: Final = ("string", "number", "integer", "boolean", "null")
ANNOTATION_KEYWORDS: Final = ("description", "title", "default", "examples")

_copysign = math.copysign


def is_plain_record(value: object) -> bool:
    """Whether ``value`` is exactly a ``dict`` or a ``FrozenDict`` (keys are not inspected)."""
    t = type(value)
    return t is dict or t is FrozenDict


def is_schema_record(value: object) -> bool:
    """Whether ``value`` is a plain record whose keys are all ``str``."""
    if not is_plain_record(value):
        return False
    assert isinstance(value, dict)
    return all(type(key) is str for key in value)


def is_plain_array(value: object) -> bool:
    """Whether ``value`` is exactly a ``list`` or a ``FrozenList``."""
    t = type(value)
    return t is list or t is FrozenList


def is_json_number(value: object) -> bool:
    """Whether ``value`` is a lossless JSON number: ``int`` (not ``bool``) or finite ``float``.

    ``-0.0``, NaN and the infinities are not.
    """
    t = type(value)
    if t is int:
        return True
    if t is not float:
        return False
    assert isinstance(value, float)
    return value - value == 0.0 and not (value == 0.0 and _copysign(1.0, value) < 0.0)


def is_json_integer(value: object) -> bool:
    """Whether ``value`` is a JSON number with no fractional part (``1.0`` counts)."""
    if type(value) is int:
        return True
    return is_json_number(value) and float(value).is_integer()  # type: ignore[arg-type]


def scalar_matches(type_name: str, value: object) -> bool:
    """Whether a scalar ``value`` is valid for the declared scalar ``type_name``."""
    if type_name == "string":
        return type(value) is str
    if type_name == "number":
        return is_json_number(value)
    if type_name == "integer":
        return is_json_integer(value)
    if type_name == "boolean":
        return type(value) is bool
    return value is None  # "null"


def is_lossless(value: Any) -> bool:
    """The lossless-JSON test, contained: whatever goes wrong while looking means "no"."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is float:
        return is_json_number(value)
    try:
        return is_json(value)
    except Exception:
        return False


def diagnostic_path(path: str) -> str:
    """The quoted form of a path: the empty root label reads ``arguments``."""
    return "arguments" if path == "" else path


def property_path(path: str, key: object) -> str:
    """The path of an object member: no leading dot under the empty root label."""
    return f"{key}" if path == "" else f"{path}.{key}"


class LazyPath:
    """A schema path spelled only when a message needs it, so deep walks stay linear.

    ``f"{LazyPath(LazyPath('schema', '.items'), '.oneOf[0]')}"`` is
    ``'schema.items.oneOf[0]'``.
    """

    __slots__ = ("parent", "segment")

    def __init__(self, parent: LazyPath | str, segment: str) -> None:
        self.parent = parent
        self.segment = segment

    def __str__(self) -> str:
        parts: list[str] = []
        node: LazyPath | str = self
        while isinstance(node, LazyPath):
            parts.append(node.segment)
            node = node.parent
        parts.append(node)
        return "".join(reversed(parts))

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
