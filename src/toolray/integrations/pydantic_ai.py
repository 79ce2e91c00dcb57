"""Pydantic AI: a toolray scope as a toolset (``pip install "toolray[integrations]"``).

``Agent(model, toolsets=[ToolrayToolset(source, scope)])`` presents the scope's tools to
the model with their JSON schemas and runs every call through toolray — the scope's
policies, guards and restrictions, and on Ray its worker processes and kill-able timeouts —
instead of in the agent's process.

- **What the model sees** is ``registry.schemas(scope)``, read at every run step: a tool
  restricted away from the scope is not listed (and a call naming it anyway is refused by
  toolray). A Code Mode scope presents ``run_code``, and its prompt sections become the
  toolset's instructions.
- **Concurrency.** A tool whose classifier does not declare it concurrency-safe is marked
  ``sequential``, so Pydantic AI runs it alone, as toolray's exclusive barrier would. Each
  call is classified again with its arguments when it runs, and the toolset keeps the
  run's calls in toolray's order (a run of safe calls overlaps, any other runs alone).
- **Failures are results.** Arguments are checked by toolray, not by Pydantic AI, and a
  failed call (invalid arguments, a refusal, a raising body, a timeout, a lost worker) is
  returned as the tool's result — its ``Error: …`` text — never raised as ``ModelRetry``,
  which would end a run whose tool keeps failing.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

from pydantic_ai import BinaryContent, RunContext
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ToolsetTool

from toolray import ToolCall

from ._lane import Lane
from ._render import Rendered, render
from ._source import ToolInfo, check_scope, read_instructions, read_tools, registry_of, run_calls

__all__ = ("ToolrayToolset",)

_RAW = "__toolray_raw_arguments__"
"""Arguments that are not a JSON object travel to toolray as the model's text, under this key."""


class _Arguments:
    """Pydantic AI's argument validator: accepts everything, so toolray's check answers.

    A JSON object is passed on as parsed; anything else (invalid JSON, an array) is kept as
    the model's text, which toolray turns into that call's ``invalid arguments`` result.
    """

    def validate_json(self, input: str | bytes | bytearray, **_: Any) -> dict[str, Any]:
        text = input if isinstance(input, str) else bytes(input).decode(errors="replace")
        try:
            value = json.loads(text)
        except ValueError:
            return {_RAW: text}
        return value if isinstance(value, dict) else {_RAW: text}

    def validate_python(self, input: Any, **_: Any) -> dict[str, Any]:
        if isinstance(input, Mapping):
            return dict(input)
        return {_RAW: json.dumps(input, default=repr)}


_ARGUMENTS = _Arguments()


class ToolrayToolset(AbstractToolset[Any]):
    """A toolray scope's tools as a Pydantic AI toolset; calls run through toolray.

    Args:
        source: a ``ToolRegistry`` (calls run in this process) or a ``RayRuntime`` (calls
            run on the scope's executor actor and the worker pools).
        scope: the agent scope whose view and pipeline to use; ``None`` is the global scope.
        id: the toolset's id, for Pydantic AI's durable execution (optional).

    Example:
        >>> import asyncio
        >>> from pydantic_ai import Agent
        >>> from pydantic_ai.models.test import TestModel
        >>> from toolray import ToolRegistry, tool
        >>> @tool(concurrency_safe=True)
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.'''
        ...     return a + b
        >>> registry = ToolRegistry()
        >>> _ = registry.register(add)
        >>> agent = Agent(TestModel(), toolsets=[ToolrayToolset(registry)])
        >>> asyncio.run(agent.run("add")).output
        '{"add":"0"}'
    """

    def __init__(self, source: object, scope: str | None = None, *, id: str | None = None) -> None:
        self._registry = registry_of(source, "ToolrayToolset")
        self._scope = check_scope(scope, "ToolrayToolset")
        self._id = id
        self._lane = Lane()
        self._tools: dict[str, ToolInfo] = {}

    @property
    def id(self) -> str | None:
        """The id given to the constructor."""
        return self._id

    @property
    def scope(self) -> str | None:
        """The toolray scope whose tools this toolset presents."""
        return self._scope

    def __repr__(self) -> str:
        return f"ToolrayToolset(scope={self._scope!r})"

    async def for_run(self, ctx: RunContext[Any]) -> ToolrayToolset:
        """A copy for one agent run: its calls keep their order apart from other runs'."""
        run = copy.copy(self)
        run._lane = Lane()
        run._tools = {}
        return run

    async def get_instructions(self, ctx: RunContext[Any]) -> str | None:
        """The scope's Code Mode prompt sections (``None`` for a native scope)."""
        return await read_instructions(self._registry, self._scope)

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        """The tools the scope presents now, with toolray's schemas."""
        infos = await read_tools(self._registry, self._scope)
        self._tools = {info.name: info for info in infos}
        return {info.name: self._toolset_tool(info) for info in infos}

    def _toolset_tool(self, info: ToolInfo) -> ToolsetTool[Any]:
        definition = ToolDefinition(
            name=info.name,
            parameters_json_schema=info.parameters,
            description=info.description,
            sequential=info.sequential,
        )
        return ToolsetTool(
            toolset=self, tool_def=definition, max_retries=1, args_validator=_ARGUMENTS
        )

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        """Run one call through toolray; a failure is returned as its ``Error: …`` text."""
        arguments = _arguments(tool_args)
        info = self._tools.get(name)
        mode = "exclusive" if info is None else info.mode(arguments)
        call = ToolCall(ctx.tool_call_id or name, name, arguments)
        async with self._lane.turn(mode):
            batch = await run_calls(self._registry, self._scope, [call])
        return _content(render(batch.results[0]))


def _arguments(tool_args: dict[str, Any]) -> str | dict[str, Any]:
    raw = tool_args.get(_RAW)
    if len(tool_args) == 1 and isinstance(raw, str):
        return raw
    return tool_args


def _content(rendered: Rendered) -> Any:
    """A text result, or the text and the images as Pydantic AI's multimodal content."""
    if not rendered.images:
        return rendered.text
    images = [
        BinaryContent(data=base64.b64decode(image.data), media_type=image.mime_type)
        for image in rendered.images
    ]
    return [rendered.text, *images] if rendered.text else images
