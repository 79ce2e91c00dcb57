"""``compile_validator``: the compiled twin of ``validate_json_schema_value``.

It must give identical lists for every value; it must really run generated code for
ordinary schemas (never the interpreter); and it must fall back to the interpreter for
schemas outside the subset, schemas nested deeper than the compile threshold, and values
whose validation raises inside generated code.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from toolray._json import FrozenDict, FrozenList, snapshot_json
from toolray.schema import (
    _codegen,
    compile_validator,
    parameter_schema_to_json_schema,
    validate_json_schema_value,
)
from toolray.schema._codegen import MAX_COMPILED_DEPTH
from toolray.schema._validate import validate_json_schema_value as reference


class HostileKey:
    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("lookup exploded")


@pytest.fixture
def no_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any interpreter fallback inside compiled validators fail loudly."""

    def boom(*args: Any) -> list[str]:
        raise AssertionError("the interpreter was used")

    monkeypatch.setattr(_codegen, "validate_json_schema_value", boom)


WIDE = {
    "type": "object",
    "properties": {
        "s": {"type": "string", "enum": ["a", "b"]},
        "n": {"type": "number", "const": 2.5},
        "i": {"type": "integer", "enum": [1, 2.0]},
        "b": {"type": "boolean", "const": True},
        "z": {"type": "null", "enum": [None]},
        "j": {"description": "any"},
        "arr": {"type": "array", "items": {"type": "array"}},
        "obj": {
            "type": "object",
            "properties": {"k": {"type": "string"}},
            "required": ["k", "k"],
            "additionalProperties": False,
        },
        "u": {"oneOf": [{"type": "number"}, {"type": "integer"}, {"type": "object"}]},
    },
    "required": ["s", "i"],
}

CASES: list[Any] = [
    {"s": "a", "i": 1},
    {"s": "c", "i": 1.5, "n": 2, "b": False, "z": None, "j": set()},
    {"s": "b", "i": 2, "arr": [[1], [2, [3]], "x", [math.nan]], "obj": {"k": 1, "extra": 2}},
    {"s": "a", "i": 1, "u": 1.5},
    {"s": "a", "i": 1, "u": 1},
    {"s": "a", "i": 1, "u": {}},
    {"s": "a", "i": 1, "u": "x"},
    {"s": "a", "i": 1, "obj": {}},
    {"s": "a", "i": 1, 7: "int key"},
    {"s": "a", "i": 1, "extra": (1,)},
    {"i": True},
    FrozenDict(s="a", i=1, arr=[[1]]),
    [],
    None,
]


@pytest.mark.parametrize("value", CASES)
@pytest.mark.parametrize("label", ["value", "", "out"])
def test_compiled_matches_interpreter(value: Any, label: str, no_interpreter: None) -> None:
    assert compile_validator(WIDE, label)(value) == reference(WIDE, value, label)


def test_generated_code_handles_odd_keys(no_interpreter: None) -> None:
    keys = ["", "a.b", "q\"'\\", "new\nline", "é", "__proto__", "{x}", "\ud800"]
    schema = {
        "type": "object",
        "properties": {key: {"type": "integer"} for key in keys},
        "required": keys,
        "additionalProperties": False,
    }
    check = compile_validator(schema, "")
    assert check(dict.fromkeys(keys, 1)) == []
    for value in [{}, dict.fromkeys(keys, "x"), {"zz": 1, "": 1.5}]:
        assert check(value) == reference(schema, value, "")
    assert check({"": "x"})[-1] == '"arguments" must be an integer'


def test_results_are_fresh_lists() -> None:
    check = compile_validator({"type": "string"})
    first = check("x")
    first.append("mutated")
    assert check("x") == []
    bad = check(1)
    bad.append("mutated")
    assert check(1) == ['"value" must be a string']


def test_frozen_schemas_and_values(no_interpreter: None) -> None:
    schema = snapshot_json(
        parameter_schema_to_json_schema(
            {"tags": {"type": "array", "items": {"type": "string"}, "required": True}}
        )
    )
    check = compile_validator(schema, "")
    assert check(FrozenDict(tags=["a"])) == []
    assert check({"tags": FrozenList(["a", 1])}) == ['"tags[1]" must be a string']


def test_unsupported_schemas_use_the_interpreter() -> None:
    forged = {"type": "object", "properties": None, "required": None}
    assert compile_validator(forged)({"a": 1}) == []
    unknown = {"type": "tuple"}
    with pytest.raises(TypeError, match="tuple"):
        compile_validator(unknown)(1)
    assert compile_validator({"type": "string", "pattern": "x"})(1) == ['"value" must be a string']


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"oneOf": [schema, {"type": "null"}]}
    return schema


@pytest.mark.parametrize("depth", [MAX_COMPILED_DEPTH, MAX_COMPILED_DEPTH + 1, 5_000])
def test_deep_schemas(depth: int) -> None:
    check = compile_validator(_nested(depth))
    assert check("leaf") == []
    # None matches both branches on every other level, so the verdict alternates with depth
    assert check(None) == validate_json_schema_value(_nested(depth), None)
    assert check(1) == ['"value" must match exactly one oneOf branch (matched 0)']


def test_schema_at_the_threshold_is_compiled(no_interpreter: None) -> None:
    check = compile_validator(_nested(MAX_COMPILED_DEPTH))
    assert check(1) == ['"value" must match exactly one oneOf branch (matched 0)']


def test_exceptions_fall_back_to_the_interpreter() -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}}
    check = compile_validator(schema)
    assert check({HostileKey("answer"): 1}) == ['"value" must be a lossless JSON value']


def test_validators_are_independent_of_later_calls() -> None:
    a = compile_validator({"type": "object", "properties": {"x": {"type": "string"}}})
    b = compile_validator({"type": "object", "properties": {"x": {"type": "integer"}}})
    assert a({"x": 1}) == ['"value.x" must be a string']
    assert b({"x": 1}) == []


class Key(str):
    __slots__ = ()


@pytest.mark.parametrize("closed", [False, True])
def test_str_subclass_keys_are_not_lossless(closed: bool) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "integer"}}}
    if closed:
        schema["additionalProperties"] = False
    value = {Key("a"): 1}
    expected = ['"value" must be a lossless JSON object']
    assert reference(schema, value) == expected
    assert compile_validator(schema)(value) == expected
    union = {"oneOf": [schema, {"type": "null"}]}
    assert compile_validator(union)(value) == reference(union, value)


def test_compiled_validators_pickle_with_cloudpickle() -> None:
    import pickle

    import cloudpickle

    schema = {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "u": {"oneOf": [{"type": "string"}, {}]}},
        "required": ["a"],
    }
    check = pickle.loads(cloudpickle.dumps(compile_validator(schema)))
    assert check({"a": 1}) == []
    assert check({"u": "x"}) == [
        'missing required property "value.a"',
        '"value.u" must match exactly one oneOf branch (matched 2)',
    ]
