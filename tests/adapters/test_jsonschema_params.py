"""``json_schema_parameters``: the one documented path for standard JSON-Schema parameters."""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from toolray import (
    AbortController,
    JsonSchemaError,
    JsonSchemaParameters,
    ToolBatchInput,
    ToolCall,
    ToolOutput,
    ToolRegistry,
    define_tool,
    json_schema_parameters,
    text_block,
)

PYDANTIC_STYLE = {
    "title": "countArguments",
    "type": "object",
    "properties": {
        "n": {"title": "N", "type": "integer"},
        "word": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        "unit": {"$ref": "#/$defs/Unit", "description": "the unit"},
    },
    "required": ["n"],
    "additionalProperties": False,
    "$defs": {"Unit": {"enum": ["C", "F"]}},
    "$schema": "https://json-schema.org/draft/2020-12/schema",
}


def _tool(parameters: Any) -> Any:
    return define_tool(
        name="count",
        description="Count",
        parameters=parameters,
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block("ok")]),
        execute=lambda args, ctx: dict(args),
    )


def _run(definition: Any, arguments: str) -> Any:
    registry = ToolRegistry()
    registry.register(definition)
    batch = ToolBatchInput([ToolCall("c1", definition.name, arguments)], AbortController().signal)
    return asyncio.run(registry.execute_batch(batch)).results[0].result


def test_standard_spellings_become_the_subset() -> None:
    params = json_schema_parameters(PYDANTIC_STYLE)
    assert isinstance(params, JsonSchemaParameters)
    assert params.schema == {
        "title": "countArguments",
        "type": "object",
        "properties": {
            "n": {"title": "N", "type": "integer"},
            "word": {"default": None, "oneOf": [{"type": "string"}, {"type": "null"}]},
            "unit": {"enum": ["C", "F"], "description": "the unit", "type": "string"},
        },
        "required": ["n"],
        "additionalProperties": False,
    }


def test_define_tool_validates_calls_against_the_json_schema() -> None:
    definition = _tool(json_schema_parameters(PYDANTIC_STYLE))
    assert definition.parameters["additionalProperties"] is False
    good = _run(definition, '{"n": 2, "word": null, "unit": "F"}')
    assert not good.is_error
    assert good.value == {"n": 2, "word": None, "unit": "F"}
    bad = _run(definition, '{"n": "two", "extra": 1}')
    assert bad.is_error
    assert bad.error.info.code == "INVALID_ARGS"
    assert "extra" in bad.content[0]["text"]


def test_type_lists_and_typeless_keywords() -> None:
    params = json_schema_parameters(
        {
            "type": "object",
            "properties": {
                "tags": {"items": {"type": ["integer", "number"]}},
                "mode": {"const": "fast"},
                "either": {"type": ["string", "null"], "description": "maybe"},
            },
            "required": ["id"],
        }
    )
    props = params.schema["properties"]
    assert props["tags"] == {"items": {"type": "number"}, "type": "array"}
    assert props["mode"] == {"const": "fast", "type": "string"}
    assert props["either"] == {
        "oneOf": [{"type": "string"}, {"type": "null"}],
        "description": "maybe",
    }
    assert props["id"] == {}  # required without a schema: any value


def test_value_constraints_fail_by_default_and_relax_into_the_description() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1, "description": "How many"}},
    }
    with pytest.raises(JsonSchemaError) as caught:
        json_schema_parameters(schema)
    assert caught.value.violations == (
        "schema.properties.n.minimum is a value constraint the subset cannot check"
        " (relax=True drops it and notes it in the description)",
    )
    relaxed = json_schema_parameters(schema, relax=True)
    assert relaxed.schema["properties"]["n"] == {
        "type": "integer",
        "description": "How many (minimum: 1)",
    }


def test_structural_keywords_are_reported_all_at_once() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"not": {"type": "string"}},
            "b": {
                "anyOf": [
                    {"type": "object", "required": ["x"]},
                    {"type": "object", "properties": {"y": {}}},
                ]
            },
            "c": {"$ref": "https://example.com/remote.json"},
            "d": {"allOf": [{"type": "string"}, {"type": "integer"}]},
            "e": {"type": "array", "items": [{"type": "string"}]},
        },
    }
    with pytest.raises(JsonSchemaError) as caught:
        json_schema_parameters(schema, relax=True)
    assert caught.value.violations == (
        "schema.properties.a.not is not supported (the subset has no equivalent)",
        "schema.properties.b.anyOf branches 0 and 1 overlap, so it cannot become oneOf",
        "schema.properties.c.$ref 'https://example.com/remote.json' is not a local reference"
        " (#/$defs/… or #/definitions/…)",
        "schema.properties.d.allOf with several schemas is not supported",
        "schema.properties.e.items as an array (tuple validation) is not supported",
    )


def test_recursive_refs_and_non_object_roots_are_refused() -> None:
    tree = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"type": "object", "properties": {"kids": {"$ref": "#/$defs/Node"}}}},
    }
    with pytest.raises(JsonSchemaError, match=r"\$ref '#/\$defs/Node' is recursive"):
        json_schema_parameters(tree)
    with pytest.raises(JsonSchemaError, match='must be "object"'):
        json_schema_parameters({"type": "string"})
    with pytest.raises(TypeError, match="JSON-Schema object, not list"):
        json_schema_parameters([])  # type: ignore[arg-type]


def test_a_json_schema_where_a_parameter_map_is_expected_names_the_path() -> None:
    with pytest.raises(JsonSchemaError, match=r"parameters=json_schema_parameters\(schema\)") as e:
        _tool({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert isinstance(e.value, TypeError)
    assert pickle.loads(pickle.dumps(e.value)).violations == e.value.violations
    with pytest.raises(TypeError, match="json_schema_parameters"):
        _tool({"properties": {"n": {"type": "integer"}}, "required": ["n"]})


def test_a_valid_map_with_schema_like_parameter_names_still_compiles() -> None:
    definition = _tool(
        {"type": {"type": "string", "required": True}, "properties": {"type": "json"}}
    )
    assert definition.parameters["required"] == ["type"]
    with pytest.raises(JsonSchemaError) as caught:
        _tool({"path": {"type": "strin"}})
    assert "json_schema_parameters" not in str(caught.value)


def test_the_input_is_copied_not_kept() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "string"}}}
    params = json_schema_parameters(schema)
    definition = _tool(params)
    schema["properties"]["a"]["type"] = "integer"
    assert params.schema["properties"]["a"]["type"] == "string"
    assert definition.parameters is not params.schema
