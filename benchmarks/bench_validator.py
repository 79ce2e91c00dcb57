"""Validator benchmark: ``compile_validator`` vs jsonschema vs fastjsonschema.

Run: ``.venv/bin/python benchmarks/bench_validator.py`` (about 20 s). Every validator is
compiled once; each figure is the best of several timed rounds, in µs per validation.
``jsonschema`` is measured with ``list(iter_errors(v))`` (all errors, like ours) and with
``is_valid``; ``fastjsonschema`` stops at the first error (it raises).

A second table times ``snapshot_json`` on a typical 1 KB argument dict against
``json.loads(json.dumps(x))``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import timeit
from collections.abc import Callable
from typing import Any

import fastjsonschema
import jsonschema

from toolray._json import snapshot_json
from toolray.schema import compile_validator, validate_json_schema_value

ROUNDS = 5
ROUND_SECONDS = 0.04


def _flat() -> tuple[dict[str, Any], Any, Any]:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "file to read"},
            "offset": {"type": "integer"},
            "limit": {"type": "integer"},
            "recursive": {"type": "boolean"},
            "mode": {"type": "string", "enum": ["text", "binary", "lines"]},
        },
        "required": ["path"],
    }
    valid = {"path": "/etc/hosts", "offset": 10, "limit": 200, "recursive": False, "mode": "text"}
    invalid = {"offset": "10", "limit": 1.5, "recursive": 1, "mode": "hex"}
    return schema, valid, invalid


def _nested() -> tuple[dict[str, Any], Any, Any]:
    def level(inner: dict[str, Any] | None) -> dict[str, Any]:
        props: dict[str, Any] = {"name": {"type": "string"}, "weight": {"type": "number"}}
        if inner is not None:
            props["child"] = inner
        return {
            "type": "object",
            "properties": props,
            "required": ["name"],
            "additionalProperties": False,
        }

    schema = level(level(level(level(None))))
    valid: dict[str, Any] = {"name": "d", "weight": 0.5}
    for name in ("c", "b", "a"):
        valid = {"name": name, "weight": 1.5, "child": valid}
    invalid = json.loads(json.dumps(valid))
    invalid["child"]["child"]["weight"] = "heavy"
    invalid["child"]["child"]["child"]["extra"] = True
    return schema, valid, invalid


def _array_of_objects() -> tuple[dict[str, Any], Any, Any]:
    server = {
        "type": "object",
        "properties": {
            "host": {"type": "string"},
            "port": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["host", "port"],
        "additionalProperties": False,
    }
    schema = {"type": "object", "properties": {"servers": {"type": "array", "items": server}}}
    servers = [{"host": f"h{i}", "port": 8000 + i, "tags": ["a", "b"]} for i in range(10)]
    valid = {"servers": servers}
    invalid = {"servers": [*servers[:8], {"host": "x"}, {"host": "y", "port": "80", "tags": [1]}]}
    return schema, valid, invalid


def _one_of() -> tuple[dict[str, Any], Any, Any]:
    def variant(kind: str, field: str, field_type: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "kind": {"type": "string", "const": kind},
                field: {"type": field_type},
            },
            "required": ["kind", field],
            "additionalProperties": False,
        }

    schema = {
        "oneOf": [
            variant("read", "path", "string"),
            variant("seek", "offset", "integer"),
            variant("flag", "enabled", "boolean"),
        ]
    }
    return schema, {"kind": "flag", "enabled": True}, {"kind": "seek", "offset": "zero"}


def _wide() -> tuple[dict[str, Any], Any, Any]:
    types = ["string", "integer", "number", "boolean"]
    samples: dict[str, Any] = {"string": "s", "integer": 7, "number": 2.5, "boolean": True}
    props = {f"p{i}": {"type": types[i % 4]} for i in range(200)}
    schema = {
        "type": "object",
        "properties": props,
        "required": [f"p{i}" for i in range(0, 200, 10)],
    }
    valid = {f"p{i}": samples[types[i % 4]] for i in range(200)}
    invalid = dict(valid)
    invalid["p3"] = "not a boolean"
    del invalid["p10"]
    return schema, valid, invalid


CASES: dict[str, Callable[[], tuple[dict[str, Any], Any, Any]]] = {
    "flat 5-property args": _flat,
    "nested objects (4 levels)": _nested,
    "array of 10 objects": _array_of_objects,
    "oneOf of 3 objects": _one_of,
    "200-property object": _wide,
}


def _time(fn: Callable[[], object]) -> float:
    """Best-of-ROUNDS time of one call, in microseconds (each round lasts ~ROUND_SECONDS)."""
    timer = timeit.Timer(fn)
    estimate = timer.timeit(number=20) / 20
    number = max(1, int(ROUND_SECONDS / max(estimate, 1e-9)))
    best = min(timer.repeat(repeat=ROUNDS, number=number))
    return best / number * 1e6


def _fast_call(check: Callable[[Any], object], value: Any) -> Callable[[], object]:
    def run() -> object:
        try:
            return check(value)
        except fastjsonschema.JsonSchemaValueException:
            return None

    return run


def _measure(
    ours: Callable[[Any], list[str]],
    draft: jsonschema.Draft202012Validator,
    fast: Callable[[Any], object],
    value: Any,
) -> tuple[float, float, float, float]:
    return (
        _time(lambda: ours(value)),
        _time(lambda: list(draft.iter_errors(value))),
        _time(lambda: draft.is_valid(value)),
        _time(_fast_call(fast, value)),
    )


def _validator_rows() -> list[tuple[str, str, float, float, float, float]]:
    rows = []
    for name, make in CASES.items():
        schema, valid, invalid = make()
        ours = compile_validator(schema)
        assert ours(valid) == [] == validate_json_schema_value(schema, valid)
        assert ours(invalid) == validate_json_schema_value(schema, invalid) != []
        draft = jsonschema.Draft202012Validator(schema)
        fast = fastjsonschema.compile(schema)
        for label, value in (("valid", valid), ("invalid", invalid)):
            rows.append((name, label, *_measure(ours, draft, fast, value)))
    return rows


def _typical_args() -> dict[str, Any]:
    args: dict[str, Any] = {
        "path": "/home/user/project/src/module/file.py",
        "pattern": "def \\w+\\(",
        "context_lines": 3,
        "case_sensitive": False,
        "max_results": 50,
        "include": ["*.py", "*.pyi", "*.toml"],
        "exclude": ["node_modules", ".venv", "__pycache__", "dist", "build"],
        "options": {"follow_symlinks": True, "hidden": False, "depth": 8, "encoding": "utf-8"},
        "edits": [
            {"line": 12 + i, "old": f"value_{i} = compute()", "new": f"value_{i} = compute(x)"}
            for i in range(8)
        ],
        "note": "Refactor the helper so that callers pass the context explicitly.",
    }
    return args


def main() -> None:
    print(f"python {sys.version.split()[0]} on {platform.machine()}, nproc={os.cpu_count()}")
    print()
    header = (
        f"{'schema':<26} {'value':<8} {'ours':>8} {'js iter':>9} {'js valid':>9} "
        f"{'fastjs':>8} {'js/ours':>8} {'ours/fast':>9}"
    )
    print("µs per validation (lower is better); js = jsonschema Draft202012Validator")
    print(header)
    print("-" * len(header))
    for name, label, ours, js_iter, js_valid, fast in _validator_rows():
        js_best = js_iter if label == "invalid" else min(js_iter, js_valid)
        print(
            f"{name:<26} {label:<8} {ours:>8.2f} {js_iter:>9.2f} {js_valid:>9.2f} "
            f"{fast:>8.2f} {js_best / ours:>7.1f}x {ours / fast:>8.2f}x"
        )
    args = _typical_args()
    size = len(json.dumps(args))
    snap = _time(lambda: snapshot_json(args))
    round_trip = _time(lambda: json.loads(json.dumps(args)))
    print()
    print(f"snapshot_json on a {size}-byte argument dict")
    print(f"  snapshot_json            {snap:8.2f} µs")
    print(f"  json.loads(json.dumps()) {round_trip:8.2f} µs")
    print(f"  ratio                    {snap / round_trip:8.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
