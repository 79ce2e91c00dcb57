"""Compiled validators: Python source generated per schema node and ``exec``'d once.

``compile_validator(schema)`` returns a function with exactly the verdicts and messages of
:func:`~toolray.schema._validate.validate_json_schema_value`, only faster: each object,
array or ``oneOf`` node becomes one flat function (scalar and annotation-only children are
inlined into their parent), and each node under a ``oneOf`` also gets a boolean *matcher*
that stops at the first failure. Generated functions return ``None`` when valid, build
paths only when a violation is reported, and skip the whole-container lossless walk when
every member was already validated (a member that validates is lossless JSON).

The interpreter stays the reference: a schema outside the enforced subset, or one nested
deeper than :data:`MAX_COMPILED_DEPTH`, is validated by it, and so is any value whose
validation raises inside generated code (the interpreter contains what it can, R-VAL-25).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from toolray._json import FrozenDict, FrozenList, JsonValue

from ._equality import json_text
from ._plain import is_lossless, property_path
from ._subset import schema_violations
from ._validate import at, validate_json_schema_value

__all__ = ("MAX_COMPILED_DEPTH", "compile_validator")

MAX_COMPILED_DEPTH: Final = 100
"""Schemas nested deeper than this are validated by the iterative interpreter."""

Validator = Callable[[JsonValue], list[str]]


class _Missing:
    __slots__ = ()


def _render(path: Any) -> str:
    """Spell a lazy path ``((root, key), key)…`` the way the interpreter builds it."""
    keys: list[Any] = []
    while type(path) is tuple:
        path, key = path
        keys.append(key)
    text: str = path
    for key in reversed(keys):
        text = f"{text}[{key}]" if type(key) is int else property_path(text, key)
    return text


def _add(errors: list[str] | None, violation: str) -> list[str]:
    if errors is None:
        return [violation]
    errors.append(violation)
    return errors


def _extend(errors: list[str] | None, violations: list[str]) -> list[str]:
    if errors is None:
        return violations
    errors.extend(violations)
    return errors


_RUNTIME: Final[dict[str, Any]] = {
    "_FD": FrozenDict,
    "_FL": FrozenList,
    "_M": _Missing(),
    "_lossless": is_lossless,
    "_add": _add,
    "_ext": _extend,
    "_at": lambda p, suffix: at(_render(p), suffix),
    "_enum": lambda p, allowed: at(_render(p), f" must be one of {json_text(allowed)}"),
    "_const": lambda p, value: at(_render(p), f" must be {json_text(value)}"),
    "_missing": lambda p, key: f'missing required property "{property_path(_render(p), key)}"',
    "_undeclared": lambda p, key: (
        f'"{property_path(_render(p), key)}" is not a declared property'
        " (additionalProperties: false)"
    ),
}
_RUNTIME["_copysign"] = math.copysign

# ``t`` is ``type(x)``; a float must be finite and not -0.0 (``x - x`` is NaN for NaN/inf).
_NOT_NEG_ZERO: Final = "({x} != 0.0 or _copysign(1.0, {x}) > 0.0)"
_NUMBER_OK: Final = "(t is int or (t is float and {x} - {x} == 0.0 and " + _NOT_NEG_ZERO + "))"
_INTEGER_OK: Final = "(t is int or (t is float and {x}.is_integer() and " + _NOT_NEG_ZERO + "))"
_SCALAR_OK: Final = {
    "string": ("type({x}) is str", " must be a string"),
    "number": (_NUMBER_OK, " must be a number"),
    "integer": (_INTEGER_OK, " must be an integer"),
    "boolean": ("({x} is True or {x} is False)", " must be a boolean"),
    "null": ("{x} is None", " must be null"),
}

# A "fail" template turns message code into a statement: report it, or stop the matcher.
_Fail = Callable[[str], str]


def _is_leaf(node: dict[str, Any]) -> bool:
    return "oneOf" not in node and node.get("type") not in ("object", "array")


class _Generator:
    """Emits the functions of one schema; ``build`` execs them and returns the entry point."""

    def __init__(self) -> None:
        self.functions: list[list[str]] = []
        self.namespace: dict[str, Any] = dict(_RUNTIME)
        self.names: dict[tuple[int, str], str] = {}
        self.queue: list[tuple[str, str, dict[str, Any]]] = []

    def build(self, schema: dict[str, Any]) -> Callable[[Any, Any], Any]:
        root = self.function(schema, "v")
        while self.queue:
            name, kind, node = self.queue.pop()
            self.functions.append(self.emit(name, kind, node))
        source = "\n".join(line for lines in self.functions for line in lines)
        exec(compile(source, "<toolray compiled validator>", "exec"), self.namespace)
        entry: Callable[[Any, Any], Any] = self.namespace[root]
        return entry

    def function(self, node: dict[str, Any], kind: str) -> str:
        """The name of the validator (``v``) or matcher (``m``) of ``node``, queued if new."""
        key = (id(node), kind)
        name = self.names.get(key)
        if name is None:
            name = self.names[key] = f"_{kind}{len(self.names)}"
            self.queue.append((name, kind, node))
        return name

    def constant(self, value: Any) -> str:
        name = f"_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def emit(self, name: str, kind: str, node: dict[str, Any]) -> list[str]:
        validating = kind == "v"
        head = f"def {name}(value, path):" if validating else f"def {name}(value):"
        if "oneOf" in node:
            body = self.one_of(node, validating)
        elif node.get("type") == "object":
            body = self.object(node, validating)
        elif node.get("type") == "array":
            body = self.array(node, validating)
        else:
            fail = _report_once if validating else _stop
            body = [
                *self.leaf(node, "value", "path", fail),
                "return None" if validating else "return True",
            ]
        return [head, *_indent(body), ""]

    def leaf(self, node: dict[str, Any], x: str, path: str, fail: _Fail) -> list[str]:
        """Statements checking local ``x`` against a scalar or annotation-only ``node``."""
        declared = node.get("type")
        if declared is None:
            return [
                f"if not _lossless({x}):",
                f"    {fail(_msg(path, ' must be a lossless JSON value'))}",
            ]
        ok, problem = _SCALAR_OK[declared]
        lines = [f"t = type({x})"] if declared in ("number", "integer") else []
        lines.append(f"if {ok.format(x=x)}:")
        lines.extend(_indent(self.literals(node, declared, x, path, fail)))
        if declared == "number":
            lines += [
                "elif t is float:",
                f"    {fail(_msg(path, ' must be a finite JSON number'))}",
            ]
        lines += ["else:", f"    {fail(_msg(path, problem))}"]
        return lines

    def literals(
        self, node: dict[str, Any], declared: str, x: str, path: str, fail: _Fail
    ) -> list[str]:
        lines: list[str] = []
        if "enum" in node and declared != "null":
            allowed = node["enum"]
            members, listed = self.constant(frozenset(allowed)), self.constant(allowed)
            lines += [f"if {x} not in {members}:", f"    {fail(f'_enum({path}, {listed})')}"]
        if "const" in node and declared != "null":
            const = self.constant(node["const"])
            differs = f"{x} is not {const}" if declared == "boolean" else f"{x} != {const}"
            lines += [
                f"{'elif' if lines else 'if'} {differs}:",
                f"    {fail(f'_const({path}, {const})')}",
            ]
        return lines or ["pass"]

    def child(self, node: dict[str, Any], x: str, path: str, validating: bool) -> list[str]:
        """Statements checking local ``x`` (at lazy ``path``) against a member schema."""
        if _is_leaf(node):
            return self.leaf(node, x, path, _report if validating else _stop)
        if validating:
            name = self.function(node, "v")
            return [f"r = {name}({x}, {path})", "if r is not None:", "    errs = _ext(errs, r)"]
        return [f"if not {self.function(node, 'm')}({x}):", "    return False"]

    def object(self, node: dict[str, Any], validating: bool) -> list[str]:
        properties: dict[str, Any] = node.get("properties", {})
        closed = node.get("additionalProperties") is False
        declared = self.constant(frozenset(properties))
        lines = [
            "if type(value) is not dict and type(value) is not _FD:",
            "    return [_at(path, ' must be an object')]" if validating else "    return False",
        ]
        if validating:
            lines.append("errs = None")
        for key in node.get("required", ()):
            stop = f"errs = _add(errs, _missing(path, {key!r}))" if validating else "return False"
            lines += [f"if {key!r} not in value:", f"    {stop}"]
        lines.append("n = 0")
        for key, child in properties.items():
            lines += [f"x = value.get({key!r}, _M)", "if x is not _M:", "    n += 1"]
            lines.extend(_indent(self.child(child, "x", f"(path, {key!r})", validating)))
        # Members that validated are lossless already; what is left to check is that every
        # key is exactly ``str`` (a ``str`` subclass can equal a declared name) and that
        # undeclared members are lossless. A FrozenDict is lossless by construction.
        bad = (
            "return [_at(path, ' must be a lossless JSON object')]"
            if validating
            else "return False"
        )
        lossless = [
            "if type(value) is not _FD:",
            "    if n == len(value):",
            "        for k in value:",
            "            if type(k) is not str:",
            f"                {bad}",
            "    else:",
            "        for k, v in value.items():",
            f"            if type(k) is not str or (k not in {declared} and not _lossless(v)):",
            f"                {bad}",
        ]
        if not validating:
            closed_lines = ["if n != len(value):", "    return False"] if closed else []
            return [*lines, *closed_lines, *lossless, "return True"]
        if closed:
            lines += [
                "if n != len(value):",
                "    for k in value:",
                f"        if type(k) is str and k not in {declared}:",
                "            errs = _add(errs, _undeclared(path, k))",
            ]
        return [*lines, "if errs is not None:", "    return errs", *lossless, "return None"]

    def array(self, node: dict[str, Any], validating: bool) -> list[str]:
        lines = [
            "if not isinstance(value, list):",
            "    return [_at(path, ' must be an array')]" if validating else "    return False",
        ]
        dense = "type(value) is list or type(value) is _FL"
        if "items" not in node:
            if not validating:
                return [*lines, "return _lossless(value)"]
            return [*lines, "if _lossless(value):", "    return None", *_dense_failure()]
        if not validating:
            body = self.child(node["items"], "x", "", False)
            return [*lines, "for x in value:", *_indent(body), f"return {dense}"]
        body = self.child(node["items"], "x", "(path, i)", True)
        return [
            *lines,
            "errs = None",
            "for i, x in enumerate(value):",
            *_indent(body),
            "if errs is not None:",
            "    return errs",
            f"if {dense}:",
            "    return None",
            *_dense_failure(),
        ]

    def one_of(self, node: dict[str, Any], validating: bool) -> list[str]:
        lines = ["c = 0"]
        for branch in node["oneOf"]:
            name = self.function(branch, "m")
            if validating:
                lines += [f"if {name}(value):", "    c += 1"]
            else:
                lines += [f"if {name}(value):", "    if c:", "        return False", "    c = 1"]
        if not validating:
            return [*lines, "return c == 1"]
        return [
            *lines,
            "if c == 1:",
            "    return None",
            "return [_at(path, ' must match exactly one oneOf branch (matched ' + str(c) + ')')]",
        ]


def _report(message: str) -> str:
    return f"errs = _add(errs, {message})"


def _report_once(message: str) -> str:
    return f"return [{message}]"


def _stop(message: str) -> str:
    return "return False"


def _msg(path: str, suffix: str) -> str:
    return f"_at({path}, {suffix!r})"


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]


def _dense_failure() -> list[str]:
    return ["return [_at(path, ' must be a dense lossless JSON array')]"]


def _depth(schema: dict[str, Any]) -> int:
    """How deeply an asserted (hence acyclic) schema nests its nodes."""
    deepest = 0
    stack: list[tuple[dict[str, Any], int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children: list[Any] = list(node.get("oneOf", ()))
        if node.get("type") == "object":
            children.extend(node.get("properties", {}).values())
        elif node.get("type") == "array" and "items" in node:
            children.append(node["items"])
        stack.extend((child, depth + 1) for child in children)
    return deepest


def compile_validator(schema: Any, path: str = "value") -> Validator:
    """Compile ``schema`` once into a fast validator.

    The result gives exactly what ``validate_json_schema_value(schema, value, path)`` gives,
    for every value.

    Args:
        schema: a raw JSON Schema (normally one accepted by ``assert_supported_json_schema``).
        path: the root label of diagnostics (``''`` reads ``arguments``).

    Example:
        >>> check = compile_validator({"type": "object", "properties": {"n": {"type": "integer"}}})
        >>> check({"n": 1}), check({"n": 1.5})
        ([], ['"value.n" must be an integer'])
    """
    if schema_violations(schema) or _depth(schema) > MAX_COMPILED_DEPTH:
        return lambda value: validate_json_schema_value(schema, value, path)
    fast = _Generator().build(schema)

    def validate(value: JsonValue) -> list[str]:
        try:
            result: list[str] | None = fast(value, path)
        except Exception:
            return validate_json_schema_value(schema, value, path)
        return [] if result is None else result

    return validate
