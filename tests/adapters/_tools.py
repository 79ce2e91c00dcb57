"""A small registry shared by the adapter tests: success, failure, image and context tools."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pydantic import TypeAdapter

from toolray import (
    AbortController,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolOutput,
    ToolRegistry,
    UserMessage,
    define_tool,
    text_block,
)

PIXEL = "iVBORw0KGgo="  # base64 bytes; the adapters never decode images


def _add(args: Any, ctx: Any) -> int:
    return int(args["a"] + args["b"])


def _fail(args: Any, ctx: Any) -> None:
    raise ValueError(f"disk on fire: {args['why']}")


def _note(args: Any, ctx: Any) -> str:
    ctx.defer_context(UserMessage([text_block(f"remember {args['what']}")]))
    return "noted"


def _chart_blocks(args: Any, value: Any) -> list[dict[str, Any]]:
    return [
        text_block(f"chart of {value}"),
        {"type": "image", "data": PIXEL, "mimeType": "image/png"},
    ]


def make_registry() -> ToolRegistry:
    """``add`` (strict-able), ``greet`` (an optional flag), ``fail``, ``chart``, ``note``."""
    registry = ToolRegistry()
    integer = {"type": "integer", "required": True}
    text = {"type": "string", "required": True}
    tools = [
        ("add", "Add two integers", {"a": integer, "b": integer}, {"type": "integer"}, _add),
        (
            "greet",
            "Greet someone",
            {"name": text, "polite": {"type": "boolean"}},
            {"type": "string"},
            lambda args, ctx: f"hello {args['name']}",
        ),
        ("fail", None, {"why": text}, {"type": "null"}, _fail),
        ("note", "Remember something", {"what": text}, {"type": "string"}, _note),
    ]
    for name, description, parameters, schema, body in tools:
        registry.register(
            define_tool(
                name=name,
                description=description,
                parameters=parameters,
                output=ToolOutput(schema=schema, render=lambda a, v: [text_block(str(v))]),
                execute=body,
            )
        )
    registry.register(
        define_tool(
            name="chart",
            description="Draw a chart",
            parameters={"of": text},
            output=ToolOutput(schema={"type": "string"}, render=_chart_blocks),
            execute=lambda args, ctx: args["of"],
        )
    )
    return registry


def run_calls(registry: ToolRegistry, calls: Sequence[ToolCall]) -> ToolBatchResult:
    batch = ToolBatchInput(list(calls), AbortController().signal)
    return asyncio.run(registry.execute_batch(batch))


def _materialize(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _materialize(item) for key, item in value.items()}
    if isinstance(value, list | tuple | Iterator) or type(value).__name__ == "ValidatorIterator":
        return [_materialize(item) for item in value]
    return value


def assert_sdk_accepts(param_type: Any, value: Any) -> None:
    """``value`` validates as the SDK's param type and loses nothing doing so.

    Validation drops unknown keys and coerces values, so an equal round trip also proves
    that every key we send is one the SDK declares.
    """
    validated = _materialize(TypeAdapter(param_type).validate_python(value))
    assert validated == value
