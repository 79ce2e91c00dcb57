"""R-VAL: value validation (``validate_json_schema_value``), one test or case per entry, plus
the P-ARGS-3 lossless-JSON acceptance list seen through an annotation-only schema.

Every case runs through the interpreter **and** ``compile_validator``; both must agree.

Python analogs used: a ``dict`` subclass / other ``Mapping`` / ``datetime`` / class instance
plays a non-plain object; a ``list`` subclass plays an Array subclass; a tuple is not an
array at all (upstream ``Array.isArray`` is false for array-likes); non-``str`` keys play
symbol keys; a key whose ``__eq__`` raises during lookup plays a throwing getter.

No Python meaning (not tested as such):

- R-VAL-10 / R-VAL-15, "present with the value ``undefined``": Python has no ``undefined``;
  ``None`` is JSON null (so ``{x: None}`` for a required string reads "must be a string").
- R-VAL-17 / R-VAL-18, sparse arrays and holes: Python lists are dense; a ``list`` subclass
  is the tested analog of a non-plain array.
- R-VAL-25, proxies and getters: Python dicts have none; the hostile-key analog is tested.
- R-VAL-27, inherited ``oneOf``/``required`` keys: dict membership is always "own";
  ``properties: None`` / ``required: None`` count as empty (the ``undefined`` analog).
- R-VAL-04 / R-VAL-06, BigInt and 2**53: Python ints of any magnitude are numbers
 .
"""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType
from typing import Any

import pytest

from toolray._json import FrozenDict, FrozenList
from toolray.schema import (
    assert_supported_json_schema,
    compile_validator,
    validate_json_schema_value,
)
from toolray.schema._validate import UnknownSchemaTypeError


class MyDict(dict[str, Any]):
    pass


class MyList(list[Any]):
    pass


class HostileKey:
    """Hashes like ``name`` and raises when compared: a lookup of ``name`` explodes."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __hash__(self) -> int:
        return hash(self.name)

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("getter exploded")


def check(schema: Any, value: Any, path: str = "value") -> list[str]:
    """Validate with the interpreter and the compiled validator; they must agree."""
    assert_supported_json_schema(schema)
    expected = validate_json_schema_value(schema, value, path)
    assert compile_validator(schema, path)(value) == expected
    return expected


def _cyclic_dict() -> dict[str, Any]:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    return cyclic


def _cyclic_list() -> list[Any]:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    return cyclic


def test_r_val_01_root_label() -> None:
    assert check({"type": "string"}, 1) == ['"value" must be a string']
    assert check({"type": "string"}, 1, "out") == ['"out" must be a string']
    assert check({"type": "string"}, 1, "") == ['"arguments" must be a string']
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {}}, "required": ["b"]}
    assert check(schema, {"a": 1}, "") == ['missing required property "b"', '"a" must be a string']
    assert check(schema, {"a": 1}, "out") == [
        'missing required property "out.b"',
        '"out.a" must be a string',
    ]


def test_r_val_02_path_syntax() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "type": "array",
                "items": {"type": "object", "properties": {"b": {"type": "string"}}},
            }
        },
    }
    assert check(schema, {"a": [{"b": "x"}, {"b": 2}]}) == ['"value.a[1].b" must be a string']
    items = {"type": "array", "items": {"type": "array", "items": {"type": "null"}}}
    assert check(items, [[None], [None, 0]]) == ['"value[1][1]" must be null']
    assert check(items, [[0]], "") == ['"[0][0]" must be null']


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        ("string", 1, "must be a string"),
        ("number", "1", "must be a number"),
        ("integer", "1", "must be an integer"),
        ("boolean", "true", "must be a boolean"),
        ("null", 0, "must be null"),
        ("object", [], "must be an object"),
        ("array", {}, "must be an array"),
    ],
)
def test_r_val_03_type_messages(declared: str, value: Any, message: str) -> None:
    assert check({"type": declared}, value) == [f'"value" {message}']


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", ['"value" must be a number']),
        (None, ['"value" must be a number']),
        (True, ['"value" must be a number']),
        (Decimal(1), ['"value" must be a number']),
        (math.nan, ['"value" must be a finite JSON number']),
        (math.inf, ['"value" must be a finite JSON number']),
        (-math.inf, ['"value" must be a finite JSON number']),
        (-0.0, ['"value" must be a finite JSON number']),
        (0.0, []),
        (0, []),
        (-1.5, []),
        (10**30, []),
        (-(10**400), []),
    ],
)
def test_r_val_04_number(value: Any, expected: list[str]) -> None:
    assert check({"type": "number"}, value) == expected


@pytest.mark.parametrize("value", [-0.0, math.nan, math.inf, "1", 1.5, True, False, None, [1]])
def test_r_val_05_integer_single_message(value: Any) -> None:
    assert check({"type": "integer"}, value) == ['"value" must be an integer']


@pytest.mark.parametrize("value", [0, -3, 1.0, 2**60, 2.0**60, 10**30, 0.0, -4.0])
def test_r_val_06_integer_accepts_integral_numbers(value: Any) -> None:
    assert check({"type": "integer"}, value) == []


def test_r_val_07_booleans_are_never_numbers() -> None:
    assert check({"type": "number", "enum": [1]}, True) == ['"value" must be a number']
    assert check({"type": "integer", "const": 0}, False) == ['"value" must be an integer']
    assert check({"type": "boolean", "enum": [True]}, 1) == ['"value" must be a boolean']


def test_r_val_08_enum_then_const() -> None:
    schema = {"type": "string", "enum": ["a", "b"], "const": "a"}
    assert check(schema, "a") == []
    assert check(schema, "c") == ['"value" must be one of ["a","b"]']
    assert check(schema, "b") == ['"value" must be "a"']
    assert check({"type": "number", "enum": [1, 2.5]}, 1.0) == []
    assert check({"type": "number", "enum": [1, 2.5]}, 3) == ['"value" must be one of [1,2.5]']
    assert check({"type": "integer", "const": 3}, 3.0) == []
    assert check({"type": "integer", "const": 3}, 4) == ['"value" must be 3']
    assert check({"type": "boolean", "enum": [True]}, False) == ['"value" must be one of [true]']
    assert check({"type": "boolean", "const": False}, True) == ['"value" must be false']
    assert check({"type": "null", "enum": [None], "const": None}, None) == []
    assert check({"type": "string", "enum": ["é", 'q"'], "const": "é"}, "x") == [
        '"value" must be one of ["é","q\\""]'
    ]


@pytest.mark.parametrize(
    "value",
    [[], (), "x", datetime(2020, 1, 1), MyDict(), OrderedDict(), MappingProxyType({}), None, 1],
    ids=["list", "tuple", "str", "datetime", "dict-subclass", "ordered", "proxy", "none", "int"],
)
def test_r_val_09_object_needs_a_plain_dict(value: Any) -> None:
    assert check({"type": "object"}, value) == ['"value" must be an object']


def test_r_val_09_frozen_dict_is_a_plain_object() -> None:
    assert (
        check({"type": "object", "properties": {"a": {"type": "integer"}}}, FrozenDict(a=1)) == []
    )


def test_r_val_10_required() -> None:
    schema = {
        "type": "object",
        "properties": {"x": {}, "s": {"type": "string"}},
        "required": ["x", "s"],
    }
    assert check(schema, {}) == [
        'missing required property "value.x"',
        'missing required property "value.s"',
    ]
    # None is JSON null: present, not missing
    assert check(schema, {"x": None, "s": None}) == ['"value.s" must be a string']
    toy = {
        "type": "object",
        "properties": {"toString": {"type": "string"}},
        "required": ["toString"],
    }
    assert check(toy, {}) == ['missing required property "value.toString"']


def test_r_val_11_properties_in_schema_order_depth_first() -> None:
    schema = {
        "type": "object",
        "properties": {
            "b": {"type": "string"},
            "n": {"type": "object", "properties": {"z": {"type": "null"}, "y": {"type": "null"}}},
            "a": {"type": "string"},
            "constructor": {"type": "string"},
        },
    }
    value = {"a": 1, "n": {"y": 1, "z": 1}, "b": 2}
    assert check(schema, value) == [
        '"value.b" must be a string',
        '"value.n.z" must be null',
        '"value.n.y" must be null',
        '"value.a" must be a string',
    ]


def test_r_val_12_undeclared_keys_in_value_order() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert check(schema, {"z": 1, "a": 1, "toString": 1, "b": 2}) == [
        '"value.z" is not a declared property (additionalProperties: false)',
        '"value.toString" is not a declared property (additionalProperties: false)',
        '"value.b" is not a declared property (additionalProperties: false)',
    ]
    assert check({"type": "object", "additionalProperties": False}, {"k": 1}, "") == [
        '"k" is not a declared property (additionalProperties: false)'
    ]


@pytest.mark.parametrize("open_flag", [None, True])
def test_r_val_13_open_objects_accept_extra_keys(open_flag: bool | None) -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    if open_flag is not None:
        schema["additionalProperties"] = open_flag
    assert check(schema, {"a": "x", "extra": [1, {"y": None}]}) == []


def test_r_val_14_order_inside_one_object() -> None:
    schema = {
        "type": "object",
        "properties": {
            "file": {"type": "string"},
            "nested": {
                "type": "object",
                "properties": {"line": {"type": "integer"}},
                "required": ["line"],
                "additionalProperties": False,
            },
            "other": {},
        },
        "required": ["file", "other"],
        "additionalProperties": False,
    }
    value = {"zz": 0, "nested": {"extra": True}, "file": 1}
    assert check(schema, value) == [
        'missing required property "value.other"',
        '"value.file" must be a string',
        'missing required property "value.nested.line"',
        '"value.nested.extra" is not a declared property (additionalProperties: false)',
        '"value.zz" is not a declared property (additionalProperties: false)',
    ]
    assert check(schema, {"file": "a", "other": 1, "nested": {"line": 1}}) == []


@pytest.mark.parametrize(
    "value",
    [
        {"a": "x", "extra": math.nan},
        {"a": "x", "extra": lambda: 1},
        {"a": "x", "extra": {1, 2}},
        {"a": "x", "extra": [(1, 2)]},
        {"a": "x", 1: "int key"},
        {"a": "x", "extra": MyDict()},
        {"a": "x", "loop": _cyclic_dict()},
    ],
    ids=["nan", "function", "set", "nested-tuple", "int-key", "dict-subclass", "cycle"],
)
def test_r_val_15_object_must_be_lossless_as_a_whole(value: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert check(schema, value) == ['"value" must be a lossless JSON object']


def test_r_val_15_a_closed_object_with_only_odd_keys() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert check(schema, {"a": 1, 2: "x"}) == ['"value" must be a lossless JSON object']


def test_r_val_16_other_violations_skip_the_lossless_check() -> None:
    closed = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    assert check(closed, {"a": 1, "extra": set()}) == [
        '"value.extra" is not a declared property (additionalProperties: false)'
    ]
    open_ = {"type": "object", "properties": {"a": {"type": "string"}, "r": {}}, "required": ["r"]}
    assert check(open_, {"a": 1, "extra": set()}) == [
        'missing required property "value.r"',
        '"value.a" must be a string',
    ]


def test_r_val_17_arrays() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    assert check(schema, [1, 2]) == []
    assert check(schema, FrozenList([1, 2])) == []
    assert check(schema, [1, 1.5]) == ['"value[1]" must be an integer']
    assert check(schema, "x") == ['"value" must be an array']
    assert check(schema, (1, 2)) == ['"value" must be an array']
    assert check(schema, MyList([1, 2])) == ['"value" must be a dense lossless JSON array']
    assert check({"type": "array"}, _cyclic_list()) == [
        '"value" must be a dense lossless JSON array'
    ]
    assert check({"type": "array"}, [1, {2}]) == ['"value" must be a dense lossless JSON array']


def test_r_val_18_item_violations_win_over_the_dense_check() -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    assert check(schema, MyList([1, 2, "x"])) == ['"value[2]" must be an integer']


def test_r_val_19_containers_without_children_schemas() -> None:
    assert check({"type": "array"}, [1, "x", None, {"a": [True]}]) == []
    assert check({"type": "array"}, [math.inf]) == ['"value" must be a dense lossless JSON array']
    assert check({"type": "object"}, {"a": [1], "b": {"c": None}}) == []
    assert check({"type": "object"}, {"a": [-0.0]}) == ['"value" must be a lossless JSON object']


@pytest.mark.parametrize(
    "value",
    [None, True, 1, -2.5, 10**40, "x", [1], {"x": None}, FrozenDict(a=[1]), FrozenList([{}])],
)
def test_r_val_20_annotation_only_accepts_lossless_json(value: Any) -> None:
    assert check({}, value) == []
    assert check({"description": "anything"}, value) == []


@pytest.mark.parametrize(
    "value",
    [
        set(),
        lambda: 1,
        math.inf,
        math.nan,
        -0.0,
        MyDict(),
        OrderedDict(),
        datetime(2020, 1, 1),
        Decimal("1.5"),
        b"x",
        (1,),
        {1: "x"},
        [1, (2,)],
        _cyclic_dict(),
        _cyclic_list(),
        object(),
    ],
    ids=[
        "set",
        "function",
        "inf",
        "nan",
        "neg-zero",
        "dict-subclass",
        "ordered-dict",
        "datetime",
        "decimal",
        "bytes",
        "tuple",
        "int-key",
        "nested-tuple",
        "cyclic-dict",
        "cyclic-list",
        "object",
    ],
)
def test_r_val_20_annotation_only_rejects_the_rest(value: Any) -> None:
    assert check({}, value) == ['"value" must be a lossless JSON value']


def test_r_val_21_shared_acyclic_references() -> None:
    shared = {"x": [1, 2]}
    value = {"a": shared, "b": shared, "c": [shared, shared]}
    assert check({}, value) == []
    assert check({"type": "object"}, value) == []
    schema = {"type": "object", "properties": {"a": {"type": "object"}, "b": {"type": "object"}}}
    assert check(schema, value) == []


def test_r_val_22_exactly_one_branch() -> None:
    disjoint = {"oneOf": [{"type": "string"}, {"type": "number"}]}
    assert check(disjoint, "x") == []
    assert check(disjoint, None) == ['"value" must match exactly one oneOf branch (matched 0)']
    nested = {
        "type": "object",
        "properties": {
            "v": {
                "oneOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}},
                    {"type": "null"},
                ]
            }
        },
    }
    assert check(nested, {"v": {"a": 1}}) == [
        '"value.v" must match exactly one oneOf branch (matched 0)'
    ]


def test_r_val_23_overlapping_branches() -> None:
    overlap = {"oneOf": [{"type": "number"}, {"type": "integer"}]}
    assert check(overlap, 1) == ['"value" must match exactly one oneOf branch (matched 2)']
    assert check(overlap, 1.0) == ['"value" must match exactly one oneOf branch (matched 2)']
    assert check(overlap, 1.5) == []
    three = {"oneOf": [{}, {"type": "string"}, {"type": "string", "enum": ["a"]}]}
    assert check(three, "a") == ['"value" must match exactly one oneOf branch (matched 3)']
    assert check(three, 5) == []


def test_r_val_24_deep_unions() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5_000):
        schema = {"oneOf": [schema, {"type": "null"}]}
    assert check(schema, "leaf") == []
    assert check(schema, 42) == ['"value" must match exactly one oneOf branch (matched 0)']


def test_r_val_25_hostile_lookups_are_contained() -> None:
    hostile = {HostileKey("answer"): 1}
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    assert check(schema, hostile) == ['"value" must be a lossless JSON value']
    union = {"oneOf": [schema, {"type": "object", "properties": {"other": {}}}]}
    assert check(union, hostile) == ['"value" must match exactly one oneOf branch (matched 0)']
    outer = {"type": "object", "properties": {"inner": schema}}
    assert check(outer, {"inner": hostile}) == ['"value.inner" must be a lossless JSON value']


def test_r_val_26_unknown_type_in_a_forged_schema() -> None:
    forged = {"type": "tuple"}
    with pytest.raises(UnknownSchemaTypeError, match="tuple"):
        validate_json_schema_value(forged, 1)
    with pytest.raises(UnknownSchemaTypeError, match="tuple"):
        compile_validator(forged)(1)
    assert isinstance(UnknownSchemaTypeError("x"), TypeError | ValueError)
    nested = {"type": "object", "properties": {"t": {"type": "tuple"}}}
    assert validate_json_schema_value(nested, {"t": 1}) == ['"value" must be a lossless JSON value']
    assert compile_validator(nested)({"t": 1}) == ['"value" must be a lossless JSON value']
    assert validate_json_schema_value(nested, {}) == []
    branch = {"oneOf": [{"type": "tuple"}, {"type": "null"}]}
    assert validate_json_schema_value(branch, None) == ['"value" must be a lossless JSON value']


def test_r_val_27_none_properties_and_required_count_as_empty() -> None:
    schema = {"type": "object", "properties": None, "required": None}
    assert validate_json_schema_value(schema, {"a": 1}) == []
    assert compile_validator(schema)({"a": 1}) == []


@pytest.mark.parametrize(
    "value",
    [
        None,
        0,
        "x",
        [],
        {},
        [{"a": set()}],
        {1: 2},
        MyDict(a=1),
        (1,),
        _cyclic_dict(),
        HostileKey("a"),
    ],
)
def test_r_val_28_total_for_asserted_schemas(value: Any) -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"oneOf": [{"type": "array", "items": {}}, {"type": "object"}]},
            "b": {"type": "integer", "enum": [1, 2]},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    assert isinstance(check(schema, value), list)
    assert isinstance(check({"oneOf": [schema, {}]}, value), list)


def test_r_val_29_no_coercion_no_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "default": 5},
            "s": {"type": "string", "default": "x"},
        },
    }
    value: dict[str, Any] = {"n": "5"}
    assert check(schema, value) == ['"value.n" must be an integer']
    assert value == {"n": "5"}
    empty: dict[str, Any] = {}
    assert check(schema, empty) == []
    assert empty == {}


P_ARGS_3_ACCEPTED = [
    None,
    True,
    False,
    "",
    "text",
    0,
    -7,
    2**70,
    1.5,
    0.0,
    [],
    [1, [2, [3]]],
    {},
    {"a": {"b": [None, {"c": "d"}]}},
    FrozenDict(a=1),
]


@pytest.mark.parametrize("value", P_ARGS_3_ACCEPTED)
def test_p_args_3_lossless_values_are_accepted(value: Any) -> None:
    assert check({}, value) == []


def test_p_args_3_shared_acyclic_reference_is_accepted() -> None:
    shared = [1, 2]
    assert check({}, {"a": shared, "b": [shared]}) == []


@pytest.mark.parametrize(
    "value",
    [
        lambda: None,
        print,
        {1, 2},
        frozenset(),
        math.nan,
        math.inf,
        -math.inf,
        -0.0,
        {"x": -0.0},
        MyList(),
        MyDict(),
        MappingProxyType({}),
        (1, 2),
        b"bytes",
        Decimal(2),
        datetime(2020, 1, 1),
        object(),
        {1: "non-str key"},
        {None: 1},
        _cyclic_dict(),
        _cyclic_list(),
        {"deep": [{"x": [{"y": set()}]}]},
    ],
)
def test_p_args_3_non_lossless_values_are_rejected(value: Any) -> None:
    assert check({}, value) == ['"value" must be a lossless JSON value']
