"""Value validation against a raw schema: the reference interpreter (R-VAL).

Diagnostics quote paths: ``"<path>" must be …`` with ``<path>.<key>`` for members and
``<path>[<i>]`` for items; the root label ``''`` reads ``arguments`` and gives members no
prefix. Inside one object the order is: missing required members (``required`` order), then
the members' own violations (``properties`` order, depth-first), then undeclared members
(value order). A container with no other violation must still be lossless JSON as a whole.
``oneOf`` needs exactly one matching branch and drops the branches' own diagnostics.

The walk uses explicit frames, so depth is not bounded by the call stack. Anything that goes
wrong while a frame runs (a hostile key, a forged schema) is contained by the nearest frame
whose ``type`` is known or absent, which reports ``"<path>" must be a lossless JSON value``;
with no such frame (an unknown ``type`` at the root) the error propagates.
"""

from __future__ import annotations

from typing import Any, Final

from toolray._json import JsonValue

from ._equality import json_equal, json_text
from ._plain import (
    SCHEMA_TYPES,
    diagnostic_path,
    is_json_number,
    is_lossless,
    is_plain_record,
    property_path,
)

__all__ = ("UnknownSchemaTypeError", "at", "validate_json_schema_value")

_ONE_OF: Final = 1
_OBJECT: Final = 2
_ARRAY: Final = 3


class UnknownSchemaTypeError(TypeError, ValueError):
    """A hand-built (never asserted) schema declares a ``type`` outside the subset."""


def at(path: str, suffix: str) -> str:
    """One diagnostic: the quoted path followed by ``suffix``."""
    return f'"{diagnostic_path(path)}"{suffix}'


class _Frame:
    __slots__ = (
        "catches",
        "children",
        "index",
        "kind",
        "matches",
        "node",
        "path",
        "tail",
        "value",
        "violations",
    )

    def __init__(self, node: Any, value: Any, path: str) -> None:
        self.node = node
        self.value = value
        self.path = path
        self.catches = False
        self.kind = 0  # 0 while starting; then _ONE_OF, _OBJECT or _ARRAY
        self.children: list[tuple[Any, Any, str]] = []
        self.index = 0
        self.matches = 0
        self.violations: list[str] = []
        self.tail: list[str] = []


def _scalar_literals(node: dict[str, Any], value: Any, path: str) -> list[str]:
    if "enum" in node:
        allowed = node["enum"]
        if not any(json_equal(value, entry) for entry in allowed):
            return [at(path, f" must be one of {json_text(allowed)}")]
    if "const" in node and not json_equal(value, node["const"]):
        return [at(path, f" must be {json_text(node['const'])}")]
    return []


def _check_scalar(node: dict[str, Any], declared: str, value: Any, path: str) -> list[str]:
    t = type(value)
    if declared == "string":
        ok, problem = t is str, " must be a string"
    elif declared == "number":
        if t is not int and t is not float:
            return [at(path, " must be a number")]
        ok, problem = is_json_number(value), " must be a finite JSON number"
    elif declared == "integer":
        ok = is_json_number(value) and (t is int or float(value).is_integer())
        problem = " must be an integer"
    elif declared == "boolean":
        ok, problem = t is bool, " must be a boolean"
    elif declared == "null":
        ok, problem = value is None, " must be null"
    else:
        raise UnknownSchemaTypeError(f"unexpected JSON schema type {declared!r}")
    return _scalar_literals(node, value, path) if ok else [at(path, problem)]


def _start_object(frame: _Frame) -> list[str] | None:
    node, value, path = frame.node, frame.value, frame.path
    if not is_plain_record(value):
        return [at(path, " must be an object")]
    properties = node.get("properties")
    properties = {} if properties is None else properties
    required = node.get("required")
    violations = [
        f'missing required property "{property_path(path, key)}"'
        for key in ([] if required is None else required)
        if key not in value
    ]
    frame.children = [
        (child, value[key], property_path(path, key))
        for key, child in properties.items()
        if key in value
    ]
    if "additionalProperties" in node and node["additionalProperties"] is False:
        frame.tail = [
            f'"{property_path(path, key)}" is not a declared property (additionalProperties: false)'
            for key in value
            if type(key) is str and key not in properties
        ]
    frame.kind = _OBJECT
    frame.violations = violations
    return None


def _start_array(frame: _Frame) -> list[str] | None:
    value, path = frame.value, frame.path
    if not isinstance(value, list):
        return [at(path, " must be an array")]
    items = frame.node.get("items")
    if items is not None:
        frame.children = [(items, entry, f"{path}[{index}]") for index, entry in enumerate(value)]
    frame.kind = _ARRAY
    return None


def _start(frame: _Frame) -> list[str] | None:
    """Run a fresh frame: its result, or ``None`` when it now waits for its children."""
    node = frame.node
    if not isinstance(node, dict):
        raise TypeError(f"schema node must be a dict, not {type(node).__name__}")
    declared: Any = node.get("type")
    frame.catches = "type" not in node or declared in SCHEMA_TYPES
    if "oneOf" in node:
        frame.children = [(branch, frame.value, frame.path) for branch in node["oneOf"]]
        frame.kind = _ONE_OF
        return None
    if "type" not in node:
        return (
            [] if is_lossless(frame.value) else [at(frame.path, " must be a lossless JSON value")]
        )
    if declared == "object":
        return _start_object(frame)
    if declared == "array":
        return _start_array(frame)
    return _check_scalar(node, declared, frame.value, frame.path)


def _finish(frame: _Frame) -> list[str]:
    if frame.kind == _ONE_OF:
        if frame.matches == 1:
            return []
        return [at(frame.path, f" must match exactly one oneOf branch (matched {frame.matches})")]
    violations = frame.violations
    violations.extend(frame.tail)
    if violations or is_lossless(frame.value):
        return violations
    if frame.kind == _OBJECT:
        return [at(frame.path, " must be a lossless JSON object")]
    return [at(frame.path, " must be a dense lossless JSON array")]


def _receive(frames: list[_Frame], result: list[str]) -> list[str] | None:
    """Hand a finished frame's result to its parent; the root's result is returned."""
    if not frames:
        return result
    parent = frames[-1]
    if parent.kind == _ONE_OF:
        parent.matches += not result
    else:
        parent.violations.extend(result)
    return None


def _step(frames: list[_Frame]) -> list[str] | None:
    frame = frames[-1]
    if frame.kind == 0:
        result = _start(frame)
    elif frame.index < len(frame.children):
        node, value, path = frame.children[frame.index]
        frame.index += 1
        frames.append(_Frame(node, value, path))
        return None
    else:
        result = _finish(frame)
    if result is None:
        return None
    frames.pop()
    return _receive(frames, result)


def validate_json_schema_value(schema: Any, value: JsonValue, path: str = "value") -> list[str]:
    """Validate ``value`` against a raw schema; every violation, in walk order.

    Given a schema accepted by ``assert_supported_json_schema`` this never raises, for any
    input. A never-asserted schema with an unknown ``type`` raises
    :class:`UnknownSchemaTypeError` when the value reaches it at the root.

    Args:
        schema: a raw JSON Schema of the enforced subset.
        value: the candidate value (any Python object).
        path: the root label; ``''`` reads ``arguments`` with unprefixed member paths.

    Example:
        >>> validate_json_schema_value({"type": "string", "enum": ["a", "b"]}, "c")
        ['"value" must be one of ["a","b"]']
    """
    frames = [_Frame(schema, value, path)]
    while True:
        try:
            result = _step(frames)
        except Exception:
            failed = frames.pop()
            while not failed.catches:
                if not frames:
                    raise
                failed = frames.pop()
            result = _receive(frames, [at(failed.path, " must be a lossless JSON value")])
        if result is not None:
            return result
