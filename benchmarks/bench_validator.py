"""Validator benchmark: ``compile_validator`` vs jsonschema vs fastjsonschema.

Run: ``.venv/bin/python benchmarks/bench_validator.py [--no-write]`` (about 20 s); it
prints the tables and writes ``benchmarks/RESULTS-validator.md``. Every validator is
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
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema

from toolray._json import snapshot_json
from toolray.schema import compile_validator, validate_json_schema_value

ROUNDS = 5
ROUND_SECONDS = 0.04
RESULTS = Path(__file__).with_name("RESULTS-validator.md")

Row = tuple[str, str, float, float, float, float]
"""A schema's name, ``valid`` / ``invalid``, then µs: ours, js iter, js valid, fastjs."""


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


def _validator_rows() -> list[Row]:
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


def _ratios(
    label: str, ours: float, js_iter: float, js_valid: float, fast: float
) -> tuple[float, float]:
    """``(jsonschema / ours, ours / fastjsonschema)``: all errors against all errors when
    invalid, the faster jsonschema mode when valid."""
    js_best = js_iter if label == "invalid" else min(js_iter, js_valid)
    return js_best / ours, ours / fast


def write(rows: list[Row], snap: float, round_trip: float, size: int, seconds: float) -> None:
    """``RESULTS-validator.md``: the method, the machine, both tables and the targets."""
    table = [
        "| schema | value | ours | js iter | js valid | fastjs | js/ours | ours/fast |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    faster: dict[str, list[float]] = {"valid": [], "invalid": []}
    of_fast: list[float] = []
    for name, label, ours, js_iter, js_valid, fast in rows:
        js_ratio, fast_ratio = _ratios(label, ours, js_iter, js_valid, fast)
        faster[label].append(js_ratio)
        if label == "valid":
            of_fast.append(fast_ratio)
        table.append(
            f"| {name} | {label} | {ours:.2f} | {js_iter:.2f} | {js_valid:.2f} | {fast:.2f} | "
            f"{js_ratio:.1f}× | {fast_ratio:.2f}× |"
        )
    met_js = min(faster["valid"] + faster["invalid"]) >= 5
    met_fast = max(of_fast) <= 1.5
    ratio = snap / round_trip
    text = f"""# Validator benchmark results

`benchmarks/bench_validator.py` (run: `.venv/bin/python benchmarks/bench_validator.py`,
{seconds:.0f} s; {time.strftime("%Y-%m-%d %H:%M")}).

Machine: {platform.machine()}, nproc {os.cpu_count()}, {platform.system()} \
{platform.release()}, CPython {sys.version.split()[0]}, jsonschema \
{_version("jsonschema")}, fastjsonschema {_version("fastjsonschema")}. Each figure is the
best of {ROUNDS} rounds of ~{ROUND_SECONDS * 1000:.0f} ms, in µs per validation; every
validator is compiled once, outside the timing.

- **ours**: `toolray.schema.compile_validator(schema)(value)`, which returns the full list
  of violations with their exact messages (identical to `validate_json_schema_value`).
- **js iter**: `list(Draft202012Validator(schema).iter_errors(value))` (all errors, like
  ours); **js valid**: `.is_valid(value)` (stops at the first error).
- **fastjs**: `fastjsonschema.compile(schema)(value)` (raises at the first error).
- `js/ours` uses *js iter* for invalid values and the faster of *js iter* / *js valid* for
  valid ones.

{chr(10).join(table)}

Targets: ≥ 5× faster than jsonschema ({"met" if met_js else "missed"}: \
{min(faster["valid"]):.0f}×–{max(faster["valid"]):.0f}× on valid values, \
{min(faster["invalid"]):.0f}×–{max(faster["invalid"]):.0f}× on invalid ones) and within 1.5× \
of fastjsonschema on valid values ({"met" if met_fast else "missed"}: \
{min(of_fast):.2f}×–{max(of_fast):.2f}×). On invalid values ours builds every message, \
fastjsonschema stops at the first.

## `snapshot_json` on a typical argument dict

| operation ({size:,}-byte argument dict) | µs |
|---|---:|
| `snapshot_json(args)` | {snap:.2f} |
| `json.loads(json.dumps(args))` | {round_trip:.2f} |
| ratio | **{ratio:.2f}×** (target ≤ 2×, {"met" if ratio <= 2 else "missed"}) |
"""
    RESULTS.write_text(text, encoding="utf-8")


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def main() -> None:
    started = time.perf_counter()
    print(f"python {sys.version.split()[0]} on {platform.machine()}, nproc={os.cpu_count()}")
    print()
    header = (
        f"{'schema':<26} {'value':<8} {'ours':>8} {'js iter':>9} {'js valid':>9} "
        f"{'fastjs':>8} {'js/ours':>8} {'ours/fast':>9}"
    )
    print("µs per validation (lower is better); js = jsonschema Draft202012Validator")
    print(header)
    print("-" * len(header))
    rows = _validator_rows()
    for name, label, ours, js_iter, js_valid, fast in rows:
        js_ratio, fast_ratio = _ratios(label, ours, js_iter, js_valid, fast)
        print(
            f"{name:<26} {label:<8} {ours:>8.2f} {js_iter:>9.2f} {js_valid:>9.2f} "
            f"{fast:>8.2f} {js_ratio:>7.1f}x {fast_ratio:>8.2f}x"
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
    if "--no-write" not in sys.argv:
        write(rows, snap, round_trip, size, time.perf_counter() - started)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
