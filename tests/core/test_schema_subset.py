"""R-JS: the enforced raw JSON-Schema subset (``assert_supported_json_schema`` and
``assert_object_json_schema``), one test or parametrized case per entry.

Python analogs used: a ``dict`` subclass or another ``Mapping`` plays
a forged-prototype record, non-``str`` keys play symbol keys, a tuple or a ``list`` subclass
plays an exotic or subclassed array, and a ``set`` / function plays ``undefined`` where a
lossless check is concerned.

No Python meaning (not tested as such):

- R-JS-03, cross-realm records, revoked proxies, throwing proxy traps, non-enumerable keys and
  prototype chains without a constructor: Python dicts have no realm, prototype, trap or
  hidden key. The analogs (dict subclass, ``MappingProxyType``, non-``str`` keys) are tested.
- R-JS-06 / R-JS-07, ``undefined`` annotations and trap proxies: there is no ``undefined``;
  a non-JSON Python value stands in for it.
- R-JS-10 / R-JS-16, sparse or decorated arrays: Python lists are always dense; tuples and
  ``list`` subclasses are the tested analogs.
- R-JS-17, "``toString`` is not inherited": dict membership is always "own"; the test only
  shows that ``toString`` is an ordinary name.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from datetime import datetime
from types import MappingProxyType
from typing import Any

import pytest

from toolray._json import FrozenDict
from toolray.errors import HarnessError, JsonSchemaError
from toolray.schema import assert_object_json_schema, assert_supported_json_schema

SUBSET = (
    " is not a supported keyword"
    " (subset: type/oneOf/properties/required/additionalProperties/items/enum/const + annotations)"
)
TYPES = "object/array/string/number/integer/boolean/null"


class MyDict(dict[str, Any]):
    pass


class MyList(list[Any]):
    pass


def violations_of(schema: Any, *, object_root: bool = False) -> list[str]:
    assert_schema = assert_object_json_schema if object_root else assert_supported_json_schema
    with pytest.raises(JsonSchemaError) as caught:
        assert_schema(schema)
    return list(caught.value.violations)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"type": "number"},
        {"type": "integer"},
        {"type": "boolean"},
        {"type": "null"},
        {"type": "array", "items": {"type": "string"}},
        {
            "type": "object",
            "properties": {
                "nested": {"type": "object", "properties": {}, "additionalProperties": False},
                "free": {},
            },
            "required": ["nested"],
            "additionalProperties": True,
        },
        {"oneOf": [{"type": "string"}, {"type": "number"}]},
        {"description": "any JSON", "title": "JSON", "default": None, "examples": [1, "x"]},
        FrozenDict({"type": "array", "items": {"type": "integer"}}),
    ],
)
def test_r_js_01_accepts_every_root_and_node(schema: Any) -> None:
    assert_supported_json_schema(schema)


@pytest.mark.parametrize("schema", [None, [], "no", 5, True])
def test_r_js_02_root_must_be_a_schema_record(schema: Any) -> None:
    assert violations_of(schema) == ["schema must be a schema object"]


@pytest.mark.parametrize(
    "schema",
    [
        MyDict(type="string"),
        OrderedDict(type="string"),
        MappingProxyType({"type": "string"}),
        {"type": "string", 1: "x"},
        {("type",): "string"},
    ],
    ids=["dict-subclass", "ordered-dict", "mapping-proxy", "int-key", "tuple-key"],
)
def test_r_js_03_exotic_records_are_not_schema_objects(schema: Any) -> None:
    assert violations_of(schema) == ["schema must be a schema object"]
    nested = {"type": "array", "items": schema}
    assert violations_of(nested) == ["schema.items must be a schema object"]


@pytest.mark.parametrize(
    "keyword",
    [
        "anyOf",
        "allOf",
        "not",
        "pattern",
        "minimum",
        "maxLength",
        "$ref",
        "$schema",
        "format",
        "nullable",
    ],
)
def test_r_js_04_unsupported_keywords(keyword: str) -> None:
    assert violations_of({"type": "object", keyword: []}) == [f"schema.{keyword}{SUBSET}"]


def test_r_js_05_every_violation_is_collected() -> None:
    schema = {
        "type": "object",
        "pattern": "x",
        "properties": {"a": {"type": "weird"}, "b": {"type": "string", "minimum": 1}},
    }
    assert violations_of(schema) == [
        f"schema.pattern{SUBSET}",
        f"schema.properties.a.type must be one of {TYPES}",
        f"schema.properties.b.minimum{SUBSET}",
    ]


def _cyclic() -> dict[str, Any]:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    return cyclic


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("default", set()),
        ("default", lambda: 1),
        ("examples", [set()]),
        ("default", math.inf),
        ("default", math.nan),
        ("default", -0.0),
        ("examples", datetime(2020, 1, 1)),
        ("examples", (1, 2)),
        ("default", {1: "x"}),
        ("default", MyDict(a=1)),
        ("default", _cyclic()),
    ],
    ids=[
        "set",
        "function",
        "list-of-set",
        "inf",
        "nan",
        "neg-zero",
        "datetime",
        "tuple",
        "int-key",
        "dict-subclass",
        "cycle",
    ],
)
def test_r_js_06_annotations_must_be_lossless(key: str, value: Any) -> None:
    assert violations_of({key: value}) == [f"schema.{key} annotation must be lossless JSON data"]


def test_r_js_06_lossless_annotations_are_accepted() -> None:
    shared = {"x": 1}
    assert_supported_json_schema({"type": "object", "default": {"a": shared, "b": shared}})
    assert_supported_json_schema({"examples": [[{"ok": True}], None, 10**30, 1.5]})


def test_r_js_07_description_and_title_must_be_strings() -> None:
    assert violations_of({"description": 1}) == ["schema.description must be a string"]
    assert violations_of({"title": 1}) == ["schema.title must be a string"]
    # the Python stand-in for `description: undefined` reports both violations
    assert violations_of({"description": set()}) == [
        "schema.description annotation must be lossless JSON data",
        "schema.description must be a string",
    ]


def test_r_js_08_type_beside_one_of_stops_the_node() -> None:
    assert violations_of({"type": "string", "oneOf": [{}, {}]}) == [
        "schema cannot declare both type and oneOf"
    ]
    # keyword and annotation violations of the node come first; nothing below is visited
    schema = {"type": "string", "oneOf": [{"type": "bad"}], "pattern": "x", "title": 1, "items": 5}
    assert violations_of(schema) == [
        f"schema.pattern{SUBSET}",
        "schema.title must be a string",
        "schema cannot declare both type and oneOf",
    ]


def test_r_js_09_constraints_need_type_or_one_of() -> None:
    schema = {
        "const": None,
        "enum": [],
        "items": {},
        "additionalProperties": True,
        "required": [],
        "properties": {},
    }
    assert violations_of(schema) == [
        "schema.properties requires type or oneOf",
        "schema.required requires type or oneOf",
        "schema.additionalProperties requires type or oneOf",
        "schema.items requires type or oneOf",
        "schema.enum requires type or oneOf",
        "schema.const requires type or oneOf",
    ]
    assert_supported_json_schema({"description": "anything", "title": "t"})


@pytest.mark.parametrize(
    "branches",
    [[], [{}], "x", None, ({}, {}), MyList([{}, {}]), {"a": {}, "b": {}}, [{"type": "bad"}]],
    ids=["empty", "one", "string", "none", "tuple", "list-subclass", "dict", "no-descent"],
)
def test_r_js_10_one_of_needs_a_plain_array_of_two(branches: Any) -> None:
    assert violations_of({"oneOf": branches}) == [
        "schema.oneOf must be an array of at least two schemas"
    ]


def test_r_js_11_one_of_branches_are_walked() -> None:
    schema = {"oneOf": [{"type": "string"}, {"type": "weird"}, {"type": "array", "items": 3}]}
    assert violations_of(schema) == [
        f"schema.oneOf[1].type must be one of {TYPES}",
        "schema.oneOf[2].items must be a schema object",
    ]


def test_r_js_12_keywords_beside_one_of_come_after_branches() -> None:
    schema = {"const": 1, "oneOf": [{"type": "weird"}, {}], "items": {}, "enum": [1]}
    assert violations_of(schema) == [
        f"schema.oneOf[0].type must be one of {TYPES}",
        "schema.items is not supported beside oneOf",
        "schema.enum is not supported beside oneOf",
        "schema.const is not supported beside oneOf",
    ]
    assert violations_of({"oneOf": [{"type": "string"}, {"type": "number"}], "items": {}}) == [
        "schema.items is not supported beside oneOf"
    ]


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        (
            ["string", "null"],
            "schema.type must be a single type string (type arrays are not supported)",
        ),
        (
            ("string", "null"),
            "schema.type must be a single type string (type arrays are not supported)",
        ),
        ("tuple", f"schema.type must be one of {TYPES}"),
        ("json", f"schema.type must be one of {TYPES}"),
        (5, f"schema.type must be one of {TYPES}"),
        (None, f"schema.type must be one of {TYPES}"),
    ],
)
def test_r_js_13_bad_types_stop_the_node(declared: Any, message: str) -> None:
    assert violations_of({"type": declared, "properties": 5, "pattern": 1}) == [
        f"schema.pattern{SUBSET}",
        message,
    ]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object", "items": {}}, ['schema.items is not supported on type "object"']),
        (
            {"type": "array", "properties": {}},
            ['schema.properties is not supported on type "array"'],
        ),
        ({"type": "object", "enum": ["x"]}, ['schema.enum is not supported on type "object"']),
        ({"type": "array", "const": None}, ['schema.const is not supported on type "array"']),
        (
            {"type": "string", "items": {"type": "bad"}, "required": 5, "additionalProperties": 5},
            [
                'schema.required is not supported on type "string"',
                'schema.additionalProperties is not supported on type "string"',
                'schema.items is not supported on type "string"',
            ],
        ),
    ],
    ids=[
        "items-on-object",
        "properties-on-array",
        "enum-on-object",
        "const-on-array",
        "no-descent",
    ],
)
def test_r_js_14_misplaced_keywords(schema: Any, expected: list[str]) -> None:
    assert violations_of(schema) == expected


@pytest.mark.parametrize(
    "properties",
    [[], None, "a", MyDict(), MappingProxyType({}), {1: {}}],
    ids=["list", "none", "string", "dict-subclass", "mapping-proxy", "int-key"],
)
def test_r_js_15_properties_must_be_a_record_of_schemas(properties: Any) -> None:
    assert violations_of({"type": "object", "properties": properties}) == [
        "schema.properties must be an object of schemas"
    ]


def test_r_js_15_each_property_must_be_a_schema_record() -> None:
    schema = {"type": "object", "properties": {"a": "x", "at": datetime(2020, 1, 1), "ok": {}}}
    assert violations_of(schema) == [
        "schema.properties.a must be a schema object",
        "schema.properties.at must be a schema object",
    ]


@pytest.mark.parametrize("required", ["a", [1], ("a",), MyList(["a"]), None, ["a", None]])
def test_r_js_16_required_must_be_an_array_of_strings(required: Any) -> None:
    schema = {"type": "object", "properties": {"a": {}}, "required": required}
    assert violations_of(schema) == ["schema.required must be an array of strings"]


def test_r_js_17_required_names_must_be_declared() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "required": ["a", "x", "a", "toString", "x"],
    }
    assert violations_of(schema) == [
        'schema.required names "x" which is not in properties',
        'schema.required names "toString" which is not in properties',
        'schema.required names "x" which is not in properties',
    ]
    assert_supported_json_schema(
        {"type": "object", "properties": {"a": {}}, "required": ["a", "a"]}
    )
    assert_supported_json_schema({"type": "object", "required": []})
    # invalid or absent properties count as {}
    assert violations_of({"type": "object", "properties": None, "required": ["missing"]}) == [
        "schema.properties must be an object of schemas",
        'schema.required names "missing" which is not in properties',
    ]
    assert violations_of({"type": "object", "required": ["a"]}) == [
        'schema.required names "a" which is not in properties'
    ]


@pytest.mark.parametrize("value", ["yes", 1, 0, None, {}])
def test_r_js_18_additional_properties_must_be_boolean(value: Any) -> None:
    assert violations_of({"type": "object", "additionalProperties": value}) == [
        "schema.additionalProperties must be a boolean"
    ]


def test_r_js_19_object_violation_order() -> None:
    schema = {
        "additionalProperties": "no",
        "required": ["zz"],
        "properties": {"a": {"type": "bad"}, "b": {"title": 2}},
        "type": "object",
        "pattern": "x",
    }
    assert violations_of(schema) == [
        f"schema.pattern{SUBSET}",
        f"schema.properties.a.type must be one of {TYPES}",
        "schema.properties.b.title must be a string",
        'schema.required names "zz" which is not in properties',
        "schema.additionalProperties must be a boolean",
    ]


@pytest.mark.parametrize("items", [[{"type": "string"}], None, 5, "string", ({},)])
def test_r_js_20_items_must_be_one_schema_record(items: Any) -> None:
    assert violations_of({"type": "array", "items": items}) == [
        "schema.items must be a schema object"
    ]


@pytest.mark.parametrize(
    ("declared", "allowed"),
    [
        ("string", []),
        ("number", ["1"]),
        ("integer", [1.5]),
        ("number", [math.nan]),
        ("number", [math.inf]),
        ("number", [-0.0]),
        ("number", [True]),
        ("integer", [False]),
        ("boolean", [0]),
        ("null", [0]),
        ("string", None),
        ("string", "a"),
        ("string", ("a",)),
        ("string", MyList(["a"])),
    ],
)
def test_r_js_21_enum_must_be_non_empty_and_type_correct(declared: str, allowed: Any) -> None:
    assert violations_of({"type": declared, "enum": allowed}) == [
        f"schema.enum must be a non-empty array of {declared} values"
    ]


@pytest.mark.parametrize(
    ("declared", "const"),
    [
        ("number", -0.0),
        ("number", math.nan),
        ("number", "1"),
        ("boolean", 1),
        ("integer", 1.5),
        ("integer", True),
        ("string", None),
        ("null", 0),
        ("string", ["a"]),
    ],
)
def test_r_js_22_const_must_match_the_type(declared: str, const: Any) -> None:
    assert violations_of({"type": declared, "const": const}) == [
        f"schema.const must be a {declared} value"
    ]


def test_r_js_23_const_must_be_in_a_valid_enum() -> None:
    assert violations_of({"type": "string", "enum": ["a"], "const": "b"}) == [
        "schema.const must be one of schema.enum when both are declared"
    ]
    assert violations_of({"type": "integer", "enum": [1, 2], "const": True}) == [
        "schema.const must be a integer value"
    ]
    # an invalid enum reports only the enum violation
    assert violations_of({"type": "string", "enum": [], "const": "b"}) == [
        "schema.enum must be a non-empty array of string values"
    ]
    assert violations_of({"type": "boolean", "enum": [True], "const": False}) == [
        "schema.const must be one of schema.enum when both are declared"
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "enum": ["a", "a"], "const": "a"},
        {"type": "integer", "enum": [1.0, 2]},
        {"type": "integer", "enum": [1.0, 2], "const": 1},
        {"type": "number", "enum": [1], "const": 1.0},
        {"type": "null", "enum": [None], "const": None},
        {"type": "boolean", "enum": [True, False], "const": False},
        {"type": "number", "enum": [1.5], "const": 1.5},
    ],
)
def test_r_js_24_accepted_literal_forms(schema: Any) -> None:
    assert_supported_json_schema(schema)


@pytest.mark.parametrize(
    ("declared", "value", "ok"),
    [
        ("number", 1, True),
        ("number", 1.5, True),
        ("number", 10**30, True),
        ("number", 0.0, True),
        ("number", -0.0, False),
        ("number", math.inf, False),
        ("number", True, False),
        ("integer", 2.0, True),
        ("integer", 2**60, True),
        ("integer", 1.5, False),
        ("integer", -0.0, False),
        ("string", "x", True),
        ("string", b"x", False),
        ("boolean", False, True),
        ("boolean", 0, False),
        ("null", None, True),
        ("null", 0, False),
    ],
)
def test_r_js_25_type_matching_rules(declared: str, value: Any, ok: bool) -> None:
    schema = {"type": declared, "const": value}
    if ok:
        assert_supported_json_schema(schema)
    else:
        assert violations_of(schema) == [f"schema.const must be a {declared} value"]


def test_r_js_26_cycles_are_reported_and_sharing_is_fine() -> None:
    cyclic: dict[str, Any] = {"type": "object"}
    cyclic["properties"] = {"self": cyclic}
    assert violations_of(cyclic) == ["schema.properties.self is circular"]
    looped: dict[str, Any] = {"type": "array"}
    looped["items"] = {"oneOf": [looped, {"type": "null"}]}
    assert violations_of(looped) == ["schema.items.oneOf[0] is circular"]
    leaf = {"type": "string"}
    assert_supported_json_schema({"type": "object", "properties": {"a": leaf, "b": leaf}})
    assert_supported_json_schema({"oneOf": [leaf, {"type": "array", "items": leaf}]})


def test_r_js_27_deep_unions_assert_without_recursion() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5_000):
        schema = {"oneOf": [schema, {"type": "null"}]}
    assert_supported_json_schema(schema)
    bad: dict[str, Any] = {"type": "strin"}
    for _ in range(5_000):
        bad = {"oneOf": [{"type": "null"}, bad]}
    assert violations_of(bad) == ["schema" + ".oneOf[1]" * 5_000 + f".type must be one of {TYPES}"]


def test_r_js_28_error_shape() -> None:
    with pytest.raises(JsonSchemaError) as caught:
        assert_supported_json_schema({"type": "object", "pattern": "x", "additionalProperties": 1})
    err = caught.value
    assert isinstance(err, HarnessError)
    assert err.code == "UNSUPPORTED_SCHEMA"
    assert err.name == "JsonSchemaError"
    assert err.violations == (
        f"schema.pattern{SUBSET}",
        "schema.additionalProperties must be a boolean",
    )
    assert err.message == "unsupported JSON schema: " + "; ".join(err.violations)
    assert str(err) == err.message


def test_r_js_29_object_root_guard() -> None:
    assert_object_json_schema({"type": "object"})
    assert_object_json_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    root = 'schema.type must be "object" (structured output is object-rooted)'
    for schema in [
        {},
        {"type": "string"},
        {"type": "array"},
        {"oneOf": [{"type": "object"}, {"type": "null"}]},
    ]:
        assert violations_of(schema, object_root=True) == [root]
    # reported only when nothing else is wrong
    assert violations_of({"type": "string", "foo": 1}, object_root=True) == [f"schema.foo{SUBSET}"]
    assert violations_of(None, object_root=True) == ["schema must be a schema object"]


@pytest.mark.parametrize("object_root", [False, True])
def test_r_js_30_forged_record_declaring_object(object_root: bool) -> None:
    forged = MyDict(type="object", properties={})
    assert violations_of(forged, object_root=object_root) == ["schema must be a schema object"]


def test_r_js_31_path_label_is_always_schema() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"oneOf": [{}]}}}}
    assert violations_of(schema) == [
        "schema.properties.a.items.oneOf must be an array of at least two schemas"
    ]
    assert violations_of(schema, object_root=True) == violations_of(schema)
