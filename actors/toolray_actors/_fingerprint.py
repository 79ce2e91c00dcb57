"""A stable fingerprint of a tool definition: "is this the same tool?" across processes.

Two drivers (or a re-run script) registering the same tool must get the same digest, so it
covers what makes a tool what it is — name, description, parameters, output schema, mode
fields, placement — and the *code* of every callable (bytecode, constants, names, recursively
into nested functions), never ``id()`` or ``hash()`` (which differ per process).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import types
from typing import Any

__all__ = ("fingerprint",)


def _code(code: types.CodeType, out: list[str], depth: int) -> None:
    out.append(code.co_name)
    out.append(code.co_code.hex())
    out.append(repr(code.co_names))
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(const, out, depth + 1)
        elif isinstance(const, frozenset):  # set order depends on the process's hash seed
            out.append(repr(sorted(const, key=repr)))
        else:
            out.append(repr(const))


def _callable(fn: Any, out: list[str], depth: int = 0) -> None:
    if depth > 8:
        out.append("…")
        return
    if isinstance(fn, functools.partial):
        out.append("partial")
        _callable(fn.func, out, depth + 1)
        out.append(repr(fn.args) + repr(sorted(fn.keywords.items())))
        return
    if isinstance(fn, types.MethodType):
        _callable(fn.__func__, out, depth + 1)
        return
    code = getattr(fn, "__code__", None)
    if isinstance(code, types.CodeType):
        _code(code, out, depth)
        # captured simple values count too (``lambda a: safe`` with another ``safe``)
        for cell in getattr(fn, "__closure__", None) or ():
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            _captured(value, out, depth)
        for default in getattr(fn, "__defaults__", None) or ():
            _captured(default, out, depth)
        return
    out.append(f"{type(fn).__module__}.{type(fn).__qualname__}")
    call_code = getattr(type(fn).__call__, "__code__", None)
    if isinstance(call_code, types.CodeType):
        _code(call_code, out, depth)


def _captured(value: Any, out: list[str], depth: int) -> None:
    if value is None or isinstance(value, str | int | float | bool | bytes):
        out.append(repr(value))
    elif isinstance(value, types.FunctionType | functools.partial | types.MethodType):
        _callable(value, out, depth + 1)
    else:
        out.append(type(value).__qualname__)


def _value(value: Any, out: list[str], depth: int = 0) -> None:
    if value is None or isinstance(value, str | int | float | bool):
        out.append(repr(value))
    elif callable(value) and not isinstance(value, type):
        _callable(value, out, depth)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        out.append(type(value).__qualname__)
        for f in dataclasses.fields(value):
            out.append(f.name)
            _value(getattr(value, f.name), out, depth + 1)
    elif isinstance(value, dict | list | tuple):
        try:
            out.append(json.dumps(value, sort_keys=True, default=repr))
        except (TypeError, ValueError):
            out.append(repr(value))
    else:
        out.append(repr(value))


def fingerprint(definition: Any) -> str:
    """A hex digest equal for identical definitions in any process."""
    out: list[str] = []
    _value(definition, out)
    return hashlib.sha256("\x1f".join(out).encode()).hexdigest()
