"""Standard JSON-Schema tool parameters: the one documented path into ``define_tool``.

``define_tool(parameters=...)`` takes the author DSL's parameter map
(``{"path": {"type": "string", "required": True}}``). A tool whose parameters already exist
as a standard JSON Schema (an MCP server's ``inputSchema``, an OpenAI function schema, a
pydantic ``model_json_schema()``) goes through :func:`json_schema_parameters` instead::

    define_tool(..., parameters=json_schema_parameters(schema), ...)

The schema is converted into the enforced subset once, here; ``define_tool`` then validates
every call's arguments against it, exactly as it does for a parameter map. Giving a JSON
Schema where a parameter map is expected fails with a message that names this function.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from toolray.errors import JsonSchemaError

from ._convert import convert

__all__ = (
    "JsonSchemaParameters",
    "JsonSchemaParametersError",
    "compile_parameters",
    "json_schema_parameters",
)

_SCHEMA_KEYWORDS: Final = frozenset(
    (
        "$schema", "$id", "$defs", "definitions", "type", "properties", "required",
        "additionalProperties", "anyOf", "allOf", "oneOf", "title", "description",
    )
)  # fmt: skip


@final
@dataclass(frozen=True, slots=True)
class JsonSchemaParameters:
    """Tool parameters given as a JSON Schema, already converted into the enforced subset.

    Made by :func:`json_schema_parameters`; ``define_tool(parameters=...)`` accepts it in
    place of a parameter map. ``schema`` is the object-rooted subset schema the registry
    validates arguments against and shows the model.
    """

    schema: dict[str, Any]


class JsonSchemaParametersError(JsonSchemaError, TypeError):
    """A JSON-Schema object given where ``define_tool`` expects a parameter map.

    A :class:`~toolray.errors.JsonSchemaError` (``define_tool``'s error for a bad parameter
    spec) and a ``TypeError`` (the wrong kind of argument); the message names
    :func:`json_schema_parameters`, the path that takes a JSON Schema.
    """


def json_schema_parameters(
    schema: Mapping[str, Any], *, relax: bool = False
) -> JsonSchemaParameters:
    """Accept a standard JSON-Schema object as a tool's parameters.

    The schema must describe an object (``"type": "object"``). Local ``$ref``/``$defs``, a
    single-schema ``allOf``, disjoint ``anyOf`` and ``type`` arrays, and typeless
    ``enum``/``const`` are rewritten into the enforced subset without changing what the
    schema accepts; metadata such as ``$schema`` or ``$comment`` is dropped.

    Args:
        schema: a JSON-Schema object (any ``Mapping``; it is copied, never kept).
        relax: value constraints the subset cannot check (``minimum``, ``maxLength``,
            ``pattern``, ``format``, a typed ``additionalProperties``…) fail by default.
            With ``relax=True`` they are dropped and listed in the node's ``description``,
            so the model still reads them; the body must then enforce them itself.

    Returns:
        The converted parameters, for ``define_tool(parameters=...)``.

    Raises:
        JsonSchemaError: every place that cannot be mapped (``schema.properties.n.minimum
            is a value constraint…``), or a root that is not an object.
        TypeError: ``schema`` is not a mapping.

    Example:
        >>> from toolray import ToolOutput, define_tool, text_block
        >>> weather = define_tool(
        ...     name="weather",
        ...     description="Current weather in a city",
        ...     parameters=json_schema_parameters({
        ...         "type": "object",
        ...         "properties": {"city": {"type": "string"},
        ...                        "unit": {"enum": ["C", "F"], "default": "C"}},
        ...         "required": ["city"],
        ...         "additionalProperties": False,
        ...     }),
        ...     output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        ...     execute=lambda args, ctx: f"sunny in {args['city']}",
        ... )
        >>> weather.parameters["properties"]["unit"]
        {'enum': ['C', 'F'], 'default': 'C', 'type': 'string'}
    """
    if not isinstance(schema, Mapping):
        raise TypeError(
            f"json_schema_parameters() takes a JSON-Schema object, not {type(schema).__name__}"
        )
    converted, violations = convert(schema, relax=relax)
    if not violations:
        # The public name, imported late: this module loads while ``toolray`` is importing.
        from . import assert_object_json_schema

        try:
            assert_object_json_schema(converted)
        except JsonSchemaError as err:
            violations = list(err.violations)
    if violations:
        raise JsonSchemaError(violations)
    return JsonSchemaParameters(schema=converted)


def compile_parameters(
    parameters: Any, compile_map: Callable[[Any], dict[str, Any]]
) -> dict[str, Any]:
    """``define_tool``'s parameters: a copy of a converted JSON Schema, or a compiled map.

    A parameter map that fails to compile and looks like a JSON-Schema object gets a
    message naming :func:`json_schema_parameters`. The check runs only after the map failed,
    so a valid map with a parameter named ``type`` or ``properties`` is never refused.

    Raises:
        JsonSchemaParametersError: ``parameters`` looks like a JSON-Schema object.
        JsonSchemaError: any other bad parameter map (from ``compile_map``).
    """
    if isinstance(parameters, JsonSchemaParameters):
        return copy.deepcopy(parameters.schema)
    try:
        return compile_map(parameters)
    except JsonSchemaError as err:
        if isinstance(parameters, Mapping) and _SCHEMA_KEYWORDS.intersection(parameters):
            raise JsonSchemaParametersError(
                [
                    "parameters looks like a JSON-Schema object, but define_tool(parameters=...)"
                    " takes a parameter map; for a standard JSON Schema pass"
                    " parameters=json_schema_parameters(schema)"
                ]
            ) from err
        raise
