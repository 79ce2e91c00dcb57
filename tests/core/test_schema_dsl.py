"""R-DSL: the author schema DSL (``value_schema_to_json_schema``,
``parameter_schema_to_json_schema``, ``validate_args``), one test or case per entry.

Python analogs used: a ``dict`` subclass, another ``Mapping``, a class instance or a record
with non-``str`` keys plays upstream's forged / symbol-keyed records; a tuple or ``list``
subclass plays an exotic array; a ``set`` plays ``undefined`` in lossless checks.

No Python meaning, or not this layer's (not tested here):

- R-DSL-14 / R-DSL-16, non-enumerable keys and forged prototypes: Python dicts have
  neither; the analogs above are tested instead.
- R-DSL-19, ``default: undefined``: there is no ``undefined``; ``default: set()`` is tested.
- R-DSL-24 caveat, JS puts integer-like keys first: Python keeps insertion order.
- R-DSL-27, R-DSL-29, R-DSL-31 (``define_tool``'s timeout check, its result shape and the
  reserved name) and R-DSL-37 (raw-registered tools are not validated): they belong to the
  definition and registry layers, not to the schema layer; R-DSL-28 and R-DSL-30 are tested
  here through the functions ``define_tool`` calls.
- R-DSL-26 and R-DSL-38 are Hypothesis properties in ``test_schema_properties.py`` (with one
  example each here).
"""

from __future__ import annotations

from collections import OrderedDict
from datetime import datetime
from types import MappingProxyType
from typing import Any

import pytest

import toolray.schema as schema_pkg
from toolray.errors import HarnessError, JsonSchemaError, ToolArgsError
from toolray.schema import (
    parameter_schema_to_json_schema,
    validate_args,
    value_schema_to_json_schema,
)

BAD_TYPE = "type must be string/number/integer/boolean/null/array/object/json, or use oneOf"


class MyDict(dict[str, Any]):
    pass


class MyList(list[Any]):
    pass


class Thing:
    type = "string"


def value_error(spec: Any) -> list[str]:
    with pytest.raises(JsonSchemaError) as caught:
        value_schema_to_json_schema(spec)
    return list(caught.value.violations)


def parameter_error(spec: Any) -> list[str]:
    with pytest.raises(JsonSchemaError) as caught:
        parameter_schema_to_json_schema(spec)
    return list(caught.value.violations)


def test_schema_package_exports() -> None:
    assert isinstance(schema_pkg.__all__, tuple)
    assert sorted(schema_pkg.__all__) == [
        "assert_object_json_schema",
        "assert_supported_json_schema",
        "compile_validator",
        "parameter_schema_to_json_schema",
        "validate_args",
        "validate_json_schema_value",
        "value_schema_to_json_schema",
    ]
    for name in schema_pkg.__all__:
        assert callable(getattr(schema_pkg, name))


def test_r_dsl_01_compile_stops_at_first_and_assert_collects_all() -> None:
    spec = {
        "type": "object",
        "additionalProperties": True,
        "properties": {"a": {"type": "string", "extra": 1}, "b": {"type": "bad"}},
    }
    with pytest.raises(JsonSchemaError) as caught:
        value_schema_to_json_schema(spec)
    assert caught.value.code == "UNSUPPORTED_SCHEMA"
    assert isinstance(caught.value, HarnessError)
    assert caught.value.violations == (
        "schema.properties.a.extra is not supported by the value schema DSL",
    )
    assert value_error({"type": "string", "title": 1, "enum": [], "const": 5}) == [
        "schema.title must be a string",
        "schema.enum must be a non-empty array of string values",
        "schema.const must be a string value",
    ]


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "string", "enum": ["a", "b"], "const": "a"},
        {"type": "number", "enum": [1, 2.5], "const": 2.5},
        {"type": "integer", "enum": [1, 2], "const": 1},
        {"type": "boolean", "enum": [True], "const": True},
        {"type": "null", "enum": [None], "const": None},
        {"type": "number"},
        {"type": "integer"},
        {"type": "boolean"},
        {"type": "null"},
    ],
)
def test_r_dsl_02_scalars_compile_one_to_one(spec: dict[str, Any]) -> None:
    compiled = value_schema_to_json_schema(spec)
    assert compiled == spec
    assert type(compiled) is dict
    assert list(compiled) == list(spec)


def test_r_dsl_03_json_node_is_annotation_only() -> None:
    assert value_schema_to_json_schema({"type": "json"}) == {}
    spec = {
        "type": "json",
        "description": "anything",
        "title": "Any JSON",
        "default": None,
        "examples": [{"nested": True}],
    }
    assert value_schema_to_json_schema(spec) == {
        "description": "anything",
        "title": "Any JSON",
        "default": None,
        "examples": [{"nested": True}],
    }


def test_r_dsl_04_arrays() -> None:
    assert value_schema_to_json_schema({"type": "array", "items": {"type": "json"}}) == {
        "type": "array",
        "items": {},
    }
    assert value_schema_to_json_schema({"type": "array"}) == {"type": "array"}


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "object"},
        {"type": "object", "additionalProperties": "yes"},
        {"type": "object", "additionalProperties": None},
        {"type": "object", "additionalProperties": 1, "properties": {}},
    ],
)
def test_r_dsl_05_objects_declare_openness(spec: Any) -> None:
    assert value_error(spec) == ["schema.additionalProperties must be explicitly true or false"]


def test_r_dsl_06_required_members_are_collected_in_order() -> None:
    spec = {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "b": {"type": "string", "required": True},
            "opt": {"type": "integer"},
            "a": {"type": "json", "required": True},
        },
    }
    compiled = value_schema_to_json_schema(spec)
    assert compiled["required"] == ["b", "a"]
    assert compiled["properties"] == {"b": {"type": "string"}, "opt": {"type": "integer"}, "a": {}}
    loose = {"type": "object", "additionalProperties": True, "properties": {"x": {"type": "null"}}}
    assert "required" not in value_schema_to_json_schema(loose)
    assert "required" not in parameter_schema_to_json_schema({"x": {"type": "null"}})


@pytest.mark.parametrize(
    "branches", ["not-an-array", ({"type": "string"}, {"type": "null"}), MyList([{}, {}]), None, {}]
)
def test_r_dsl_07_one_of_must_be_a_plain_array(branches: Any) -> None:
    assert value_error({"oneOf": branches}) == [
        "schema.oneOf must be an array of at least two value schemas"
    ]


@pytest.mark.parametrize("branches", [[], [{"type": "string"}]])
def test_r_dsl_07_short_one_of_fails_at_assert(branches: Any) -> None:
    assert value_error({"oneOf": branches}) == [
        "schema.oneOf must be an array of at least two schemas"
    ]


def test_r_dsl_08_type_and_one_of() -> None:
    spec = {"type": "string", "oneOf": [{"type": "string"}, {"type": "null"}]}
    assert value_error(spec) == ["schema cannot declare both type and oneOf"]
    spec = {"oneOf": [{"type": "string"}, {"type": "null"}], "type": "string"}
    assert value_error(spec) == ["schema cannot declare both type and oneOf"]


@pytest.mark.parametrize(
    ("spec", "key"),
    [
        ({"type": "string", "extra": True}, "extra"),
        ({"type": "json", "enum": [1]}, "enum"),
        ({"oneOf": [{"type": "string"}, {"type": "null"}], "items": {}}, "items"),
        ({"type": "string", "b": 1, "a": 2}, "b"),
        ({"type": "object", "additionalProperties": True, "items": {}}, "items"),
        ({"type": "array", "properties": {}}, "properties"),
        ({"type": "number", "items": {}}, "items"),
        ({"type": "array", "enum": []}, "enum"),
        ({"type": "object", "additionalProperties": True, "const": 1}, "const"),
        ({"type": "string", "pattern": "x"}, "pattern"),
        ({"oneOf": [{}, {}], "type": "string", "items": {}}, "items"),
    ],
)
def test_r_dsl_09_each_node_allows_only_its_keys(spec: Any, key: str) -> None:
    assert value_error(spec) == [f"schema.{key} is not supported by the value schema DSL"]


def test_r_dsl_09_annotations_are_allowed_everywhere() -> None:
    notes = {"description": "d", "title": "t", "default": None, "examples": []}
    for spec in [
        {"type": "string"},
        {"type": "json"},
        {"type": "array"},
        {"type": "object", "additionalProperties": False},
        {"oneOf": [{"type": "string"}, {"type": "null"}]},
    ]:
        value_schema_to_json_schema({**spec, **notes})


def test_r_dsl_10_required_only_on_property_map_members() -> None:
    spec = {"type": "array", "items": {"type": "string", "required": True}}
    assert value_error(spec) == ["schema.items.required is not supported by the value schema DSL"]
    spec = {"oneOf": [{"type": "string", "required": True}, {"type": "null"}]}
    assert value_error(spec) == [
        "schema.oneOf[0].required is not supported by the value schema DSL"
    ]
    assert value_error({"type": "string", "required": True}) == [
        "schema.required is not supported by the value schema DSL"
    ]


@pytest.mark.parametrize("flag", [False, 1, "yes", None])
def test_r_dsl_11_required_must_be_true(flag: Any) -> None:
    assert parameter_error({"v": {"type": "string", "required": flag}}) == [
        "parameters.v.required must be true when present"
    ]
    nested = {
        "type": "object",
        "additionalProperties": True,
        "properties": {"x": {"required": flag}},
    }
    assert value_error(nested) == ["schema.properties.x.required must be true when present"]


def test_r_dsl_12_one_of_member_may_be_required() -> None:
    spec = {"v": {"oneOf": [{"type": "string"}, {"type": "null"}], "required": True}}
    assert parameter_schema_to_json_schema(spec) == {
        "type": "object",
        "properties": {"v": {"oneOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["v"],
    }


@pytest.mark.parametrize(
    "spec", [{}, {"type": "tuple"}, {"type": None}, {"type": ["string"]}, {"description": "x"}]
)
def test_r_dsl_13_missing_or_unknown_type(spec: Any) -> None:
    assert value_error(spec) == [f"schema.{BAD_TYPE}"]


@pytest.mark.parametrize(
    "spec",
    [
        None,
        42,
        "string",
        [],
        datetime(2020, 1, 1),
        Thing(),
        MyDict(type="string"),
        OrderedDict(type="string"),
        MappingProxyType({"type": "string"}),
        {"type": "string", 1: "x"},
    ],
    ids=[
        "none",
        "int",
        "str",
        "list",
        "datetime",
        "instance",
        "dict-subclass",
        "ordered-dict",
        "mapping-proxy",
        "int-key",
    ],
)
def test_r_dsl_14_nodes_must_be_plain_records(spec: Any) -> None:
    assert value_error(spec) == ["schema must be a value schema object"]
    assert value_error({"type": "array", "items": spec}) == [
        "schema.items must be a value schema object"
    ]


def test_r_dsl_15_property_maps_must_be_plain_records() -> None:
    assert parameter_error(None) == ["parameters must be an object of value schemas"]
    assert parameter_error([]) == ["parameters must be an object of value schemas"]
    spec = {"o": {"type": "object", "additionalProperties": True, "properties": 5}}
    assert parameter_error(spec) == ["parameters.o.properties must be an object of value schemas"]
    assert parameter_error({"bad": 42}) == ["parameters.bad must be a value schema object"]
    assert parameter_error({"ok": {"type": "null"}, "bad": None}) == [
        "parameters.bad must be a value schema object"
    ]


@pytest.mark.parametrize(
    "spec",
    [{1: {"type": "string"}}, MyDict(a={"type": "string"}), MappingProxyType({})],
    ids=["int-key", "dict-subclass", "mapping-proxy"],
)
def test_r_dsl_16_exotic_parameter_maps(spec: Any) -> None:
    assert parameter_error(spec) == ["parameters must be an object of value schemas"]


@pytest.mark.parametrize("allowed", ["a", ("a",), MyList(["a"]), None, {"a": 1}])
def test_r_dsl_17_enum_must_be_a_plain_array(allowed: Any) -> None:
    assert value_error({"type": "string", "enum": allowed}) == [
        "schema.enum must be a non-empty array of scalar values"
    ]


def test_r_dsl_17_enum_contents_fail_at_assert() -> None:
    assert value_error({"type": "string", "enum": []}) == [
        "schema.enum must be a non-empty array of string values"
    ]
    assert value_error({"type": "number", "enum": ["1"]}) == [
        "schema.enum must be a non-empty array of number values"
    ]
    spec = {"type": "string", "enum": ["a"]}
    compiled = value_schema_to_json_schema(spec)
    assert compiled["enum"] == ["a"]
    assert compiled["enum"] is not spec["enum"]  # a copy, as upstream's Array.from


def test_r_dsl_18_const_checks() -> None:
    assert value_error({"type": "integer", "const": 1.5}) == [
        "schema.const must be a integer value"
    ]
    assert value_error({"type": "boolean", "const": 1}) == ["schema.const must be a boolean value"]
    assert value_error({"type": "string", "enum": ["a"], "const": "b"}) == [
        "schema.const must be one of schema.enum when both are declared"
    ]


def test_r_dsl_19_annotations_are_copied_when_present_and_checked_at_assert() -> None:
    assert value_schema_to_json_schema({"type": "string"}) == {"type": "string"}
    assert value_error({"type": "json", "default": set()}) == [
        "schema.default annotation must be lossless JSON data"
    ]
    assert value_error({"type": "string", "description": 5}) == [
        "schema.description must be a string"
    ]
    examples = [{"a": 1}]
    compiled = value_schema_to_json_schema({"type": "json", "examples": examples})
    assert compiled == {"examples": [{"a": 1}]}


def test_r_dsl_20_assert_paths_start_at_schema() -> None:
    assert parameter_error({"a": {"type": "string", "enum": []}}) == [
        "schema.properties.a.enum must be a non-empty array of string values"
    ]
    assert parameter_error({"a": {"type": "string", "required": "yes"}}) == [
        "parameters.a.required must be true when present"
    ]
    assert parameter_error({"a": {"type": "strin"}}) == [f"parameters.a.{BAD_TYPE}"]


def test_r_dsl_21_cycles() -> None:
    spec: dict[str, Any] = {"type": "array"}
    spec["items"] = spec
    assert value_error(spec) == ["schema.items is circular"]
    properties: dict[str, Any] = {}
    properties["self"] = {"type": "object", "additionalProperties": True, "properties": properties}
    assert parameter_error(properties) == ["parameters.self.properties is circular"]
    union: dict[str, Any] = {"oneOf": [{"type": "null"}]}
    union["oneOf"].append(union)
    assert value_error(union) == ["schema.oneOf[1] is circular"]
    leaf = {"type": "string"}
    compiled = parameter_schema_to_json_schema({"a": leaf, "b": leaf, "c": {"oneOf": [leaf, leaf]}})
    assert compiled["properties"]["a"] == compiled["properties"]["b"] == {"type": "string"}


def test_r_dsl_22_deep_unions_compile_without_recursion() -> None:
    depth = 5_000
    spec: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        spec = {"oneOf": [spec, {"type": "null"}]}
    compiled = value_schema_to_json_schema(spec)
    layers = 0
    cursor = compiled
    while "oneOf" in cursor:
        assert cursor["oneOf"][1] == {"type": "null"}
        cursor = cursor["oneOf"][0]
        layers += 1
    assert layers == depth
    assert cursor == {"type": "string"}


def test_r_dsl_23_proto_is_an_ordinary_key() -> None:
    compiled = parameter_schema_to_json_schema({"__proto__": {"type": "string", "required": True}})
    assert compiled["properties"] == {"__proto__": {"type": "string"}}
    assert compiled["required"] == ["__proto__"]


def test_r_dsl_24_key_order_of_compiled_nodes() -> None:
    notes = {"examples": [1], "default": 1, "title": "t", "description": "d"}
    obj = {
        "properties": {"x": {"type": "null", "required": True}},
        **notes,
        "additionalProperties": False,
        "type": "object",
    }
    assert list(value_schema_to_json_schema(obj)) == [
        "type",
        "description",
        "title",
        "default",
        "examples",
        "additionalProperties",
        "properties",
        "required",
    ]
    scalar = {"const": 1, "enum": [1], **notes, "type": "integer"}
    assert list(value_schema_to_json_schema(scalar)) == [
        "type",
        "description",
        "title",
        "default",
        "examples",
        "enum",
        "const",
    ]
    array = {"items": {"type": "null"}, **notes, "type": "array"}
    assert list(value_schema_to_json_schema(array)) == [
        "type",
        "description",
        "title",
        "default",
        "examples",
        "items",
    ]
    union = {**notes, "oneOf": [{"type": "null"}, {"type": "string"}]}
    assert list(value_schema_to_json_schema(union)) == [
        "oneOf",
        "description",
        "title",
        "default",
        "examples",
    ]
    root = parameter_schema_to_json_schema(
        {"z": {"type": "null", "required": True}, "a": {"type": "null"}}
    )
    assert list(root) == ["type", "properties", "required"]
    assert list(root["properties"]) == ["z", "a"]


def test_r_dsl_25_parameter_root_is_open() -> None:
    assert parameter_schema_to_json_schema({}) == {"type": "object", "properties": {}}
    compiled = parameter_schema_to_json_schema(
        {
            "closed": {
                "type": "object",
                "additionalProperties": False,
                "required": True,
                "properties": {"id": {"type": "integer", "required": True}},
            },
            "open": {"type": "object", "additionalProperties": True},
        }
    )
    assert compiled == {
        "type": "object",
        "properties": {
            "closed": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            },
            "open": {"type": "object", "additionalProperties": True},
        },
        "required": ["closed"],
    }
    assert "additionalProperties" not in compiled


def test_r_dsl_26_a_well_formed_spec_compiles() -> None:
    spec = {
        "a": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "json"}]}},
        "b": {"type": "object", "additionalProperties": False, "properties": {}, "required": True},
    }
    parameter_schema_to_json_schema(spec)  # the Hypothesis property is in test_schema_properties


def test_r_dsl_28_bad_specs_fail_when_compiled() -> None:
    assert parameter_error({"a": {"type": "strin"}}) == [f"parameters.a.{BAD_TYPE}"]
    assert value_error(
        {"type": "object", "additionalProperties": True, "properties": {"x": 1}}
    ) == ["schema.properties.x must be a value schema object"]


def test_r_dsl_30_violations_become_tool_args_error() -> None:
    spec = {"path": {"type": "string", "required": True}, "n": {"type": "integer", "default": 3}}
    args: dict[str, Any] = {"n": "3"}
    violations = validate_args(spec, args)
    assert violations == ['missing required property "path"', '"n" must be an integer']
    err = ToolArgsError(violations)
    assert (
        err.message == 'invalid arguments: missing required property "path"; "n" must be an integer'
    )
    assert args == {"n": "3"}  # never coerced, defaults never applied
    assert validate_args(spec, {"path": "p"}) == []


def test_r_dsl_32_tool_args_error_shape() -> None:
    violations = ["a", "b"]
    err = ToolArgsError(violations)
    violations.append("c")
    assert err.name == "ToolArgsError"
    assert err.code == "INVALID_ARGS"
    assert err.message == "invalid arguments: a; b"
    assert err.violations == ("a", "b")
    assert isinstance(err, HarnessError)


def test_r_dsl_33_validate_args_compiles_every_call() -> None:
    with pytest.raises(JsonSchemaError) as caught:
        validate_args({"k": {"type": "string", "enum": [1]}}, {"k": "x"})
    assert caught.value.violations == (
        "schema.properties.k.enum must be a non-empty array of string values",
    )
    with pytest.raises(JsonSchemaError) as caught:
        validate_args({"k": {"type": "tuple"}}, {})
    assert caught.value.violations == (f"parameters.k.{BAD_TYPE}",)
    spec: dict[str, Any] = {"k": {"type": "string"}}
    assert validate_args(spec, {"k": 1}) == ['"k" must be a string']
    spec["k"] = {"type": "integer"}
    assert validate_args(spec, {"k": 1}) == []


@pytest.mark.parametrize("args", [None, "nope", [], 5, True, ("a",), MyDict()])
def test_r_dsl_34_non_object_arguments(args: Any) -> None:
    assert validate_args({"a": {"type": "string"}}, args) == ['"arguments" must be an object']


def test_r_dsl_35_child_paths_have_no_prefix() -> None:
    spec = {
        "path": {"type": "string", "required": True},
        "s": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "config": {
            "type": "object",
            "additionalProperties": True,
            "properties": {"host": {"type": "string", "required": True}},
        },
        "servers": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": True,
                "properties": {"host": {"type": "string", "required": True}},
            },
        },
    }
    assert validate_args(
        spec, {"s": 1, "tags": ["a", 2], "config": {}, "servers": [{"host": "h"}, {}]}
    ) == [
        'missing required property "path"',
        '"s" must be a string',
        '"tags[1]" must be a string',
        'missing required property "config.host"',
        'missing required property "servers[1].host"',
    ]


def test_r_dsl_36_open_root_allows_extra_and_omitted_keys() -> None:
    spec = {"a": {"type": "string"}, "b": {"type": "integer", "required": True}}
    assert validate_args(spec, {"b": 1, "zzz": [1, {"x": None}]}) == []
    assert validate_args(spec, {"b": 2}) == []


def test_r_dsl_38_dropping_a_required_key_is_reported() -> None:
    spec = {"victim": {"type": "string", "required": True}, "other": {"type": "null"}}
    violations = validate_args(spec, {"other": None})
    assert any('"victim"' in v for v in violations)
