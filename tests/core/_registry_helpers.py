"""Shared builders for the registry behaviour suite (tests only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolray import (
    AbortController,
    AbortSignal,
    ActivationContext,
    ModelSelection,
    ResolvedToolSet,
    ToolDefinition,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    text_block,
)

MODEL = ModelSelection("acme", "m-1", reasoning_effort="low")
EMPTY_PARAMS: dict[str, Any] = {"type": "object", "properties": {}}


def string_output() -> ToolOutput:
    """An output contract for a string value, rendered as one text block."""
    return ToolOutput(schema={"type": "string"}, render=lambda args, value: [text_block(value)])


def make_tool(
    name: str,
    *,
    value: str | None = None,
    execute: Callable[..., Any] | None = None,
    description: str | None = "a test tool",
    parameters: Any = None,
    **fields: Any,
) -> ToolDefinition:
    """A raw definition whose async body returns ``value`` (default: its own name)."""
    result = name if value is None else value

    async def run(args: Any, ctx: Any) -> str:
        return result

    return ToolDefinition(
        name=name,
        description=description,
        parameters=dict(EMPTY_PARAMS) if parameters is None else parameters,
        output=string_output(),
        execute=execute if execute is not None else run,
        **fields,
    )


def names(registry: ToolRegistry, scope: str | None = None, tool_set: Any = None) -> list[str]:
    """The names ``schemas(scope)`` lists, in order."""
    return [s["name"] for s in registry.schemas(scope, tool_set)]


def signal() -> AbortSignal:
    """A fresh, never-aborted signal."""
    return AbortController().signal


def activation(scope: str | None, sig: AbortSignal | None = None) -> ActivationContext:
    """An activation context for one step of ``scope``."""
    return ActivationContext(scope, MODEL, sig if sig is not None else signal())


async def resolve(
    registry: ToolRegistry, scope: str | None, sig: AbortSignal | None = None
) -> ResolvedToolSet:
    """``registry.resolve`` for ``scope`` with a fresh signal."""
    return await registry.resolve(activation(scope, sig))


async def run(
    registry: ToolRegistry,
    name: str,
    *,
    scope: str | None = None,
    arguments: Any = None,
    tool_set: ResolvedToolSet | None = None,
    parent: Any = None,
    sig: AbortSignal | None = None,
    call_id: str = "c1",
) -> ToolExecutionResult:
    """Execute one call through the pipeline."""
    return await registry.execute(
        ToolExecutionInput(
            call_id,
            name,
            {} if arguments is None else arguments,
            sig if sig is not None else signal(),
            scope=scope,
            tool_set=tool_set,
            parent=parent,
        )
    )


def text_of(result: ToolExecutionResult) -> str:
    """The text of a single-text-block result."""
    assert len(result.content) == 1, result.content
    return str(result.content[0]["text"])


def code_of(result: ToolExecutionResult) -> str | None:
    """The failure's ``info.code`` (``None`` for a success or an info-less failure)."""
    if not result.is_error:
        return None
    info = result.error.info  # type: ignore[union-attr]
    return None if info is None else info.code


def mode_input(
    name: str,
    arguments: Any = None,
    *,
    scope: str | None = None,
    tool_set: ResolvedToolSet | None = None,
    parent: Any = None,
) -> ToolExecutionInput:
    """An execution input for ``execution_mode``."""
    return ToolExecutionInput(
        "m1",
        name,
        {} if arguments is None else arguments,
        signal(),
        scope=scope,
        tool_set=tool_set,
        parent=parent,
    )
