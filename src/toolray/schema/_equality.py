"""Type-aware JSON equality and the JSON text used in messages.

Python's ``==`` says ``True == 1`` and ``1 == 1.0``; JSON (and JavaScript's ``===`` /
``Array.prototype.includes``) says the first is false and the second true. ``json_equal``
compares by *kind*: ``bool`` and numbers are different kinds, ``int`` and ``float`` are the
same kind, and containers compare structurally with the same rule (iteratively, so depth
is not bounded by the call stack; a pair already under comparison counts as equal, which
keeps cyclic inputs finite).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ("json_equal", "json_text")

_NUMBER = "number"
# json.dumps(x, separators=(",", ":"), ensure_ascii=False), without a new encoder per call
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def _kind(value: object) -> str:
    t = type(value)
    if t is bool:
        return "boolean"
    if t is int or t is float:
        return _NUMBER
    if t is str:
        return "string"
    if value is None:
        return "null"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "other"


def json_equal(left: Any, right: Any) -> bool:
    """Whether two JSON values are equal, JSON-style.

    Example:
        >>> json_equal(1, 1.0), json_equal(True, 1), json_equal({"a": [1]}, {"a": [1.0]})
        (True, False, True)
    """
    stack: list[tuple[Any, Any]] = [(left, right)]
    under_way: set[tuple[int, int]] = set()
    while stack:
        a, b = stack.pop()
        if a is b:
            continue
        kind = _kind(a)
        if kind != _kind(b):
            return False
        if kind == "array":
            if len(a) != len(b):
                return False
        elif kind == "object":
            if len(a) != len(b) or any(key not in b for key in a):
                return False
        elif kind == "other" or a != b:
            return False
        if kind in ("array", "object"):
            pair = (id(a), id(b))
            if pair in under_way:
                continue
            under_way.add(pair)
            if kind == "array":
                stack.extend(zip(a, b, strict=True))
            else:
                stack.extend((a[key], b[key]) for key in a)
    return True


def json_text(value: Any) -> str:
    """Compact JSON text, as JavaScript's ``JSON.stringify`` prints enum and const values.

    Example:
        >>> json_text(["a", "b"])
        '["a","b"]'
    """
    return _ENCODER.encode(value)
