"""The OpenAI Agents SDK: a toolray scope as ``FunctionTool``s.

``Agent(name=..., tools=function_tools(source, scope))`` gives the agent one
``FunctionTool`` per tool the scope presents, with toolray's JSON schema. Invoking one runs
the call through toolray — the scope's policies, guards and restrictions, and on Ray its
worker processes and kill-able timeouts — and returns the rendered result text; a failed
call returns its ``Error: …`` text, so the run goes on (a ``FunctionTool`` that raised would
end it).

- **The list is a snapshot** of the scope's view when ``function_tools`` is called: a tool
  restricted away later is refused by toolray as a result (``Error: …``); call
  ``function_tools`` again for a new step's view.
- **Strict schemas** where toolray's schema allows it (every property required, closed
  objects), exactly as :func:`toolray.adapters.openai.tools_for_openai` decides; other tools
  are sent non-strict, unchanged.
- **Order.** The SDK runs a turn's function calls concurrently. The tools of one
  ``function_tools`` call share a lane that keeps toolray's order: concurrency-safe calls
  overlap, any other call runs alone, in the model's order. Give each concurrent agent run
  its own list.
- **Images** in a result become ``ToolOutputImage`` items after the text.
"""

from __future__ import annotations

import json
from typing import Any

from agents import FunctionTool, ToolOutputImage, ToolOutputText
from agents.tool_context import ToolContext

from toolray import ToolCall
from toolray.adapters._strict import strict_parameters

from ._lane import Lane
from ._render import Rendered, render
from ._source import ToolInfo, ToolSource, check_scope, read_tools_now, registry_of, run_calls

__all__ = ("function_tools",)


def function_tools(source: object, scope: str | None = None) -> list[FunctionTool]:
    """One ``FunctionTool`` per tool ``scope`` presents; invocations run through toolray.

    Args:
        source: a ``ToolRegistry`` (in-process) or a ``RayRuntime`` (the scope's executor
            actor and worker pools).
        scope: the agent scope whose view and pipeline to use; ``None`` is the global scope.

    Raises:
        TypeError: ``source`` is neither a registry nor a runtime, or ``scope`` is not a str.

    Example:
        >>> from toolray import ToolRegistry, tool
        >>> @tool
        ... def shout(text: str, times: int = 1) -> str:
        ...     '''Upper-case a text.'''
        ...     return text.upper() * times
        >>> registry = ToolRegistry()
        >>> _ = registry.register(shout)
        >>> [(t.name, t.strict_json_schema) for t in function_tools(registry)]  # times is optional
        [('shout', False)]
    """
    registry = registry_of(source, "function_tools")
    checked = check_scope(scope, "function_tools")
    lane = Lane()
    infos = read_tools_now(registry, checked)
    return [_function_tool(registry, checked, info, lane) for info in infos]


def _function_tool(
    registry: ToolSource, scope: str | None, info: ToolInfo, lane: Lane
) -> FunctionTool:
    async def invoke(ctx: ToolContext[Any], arguments: str) -> Any:
        mode = info.mode(_parsed(arguments))
        call = ToolCall(ctx.tool_call_id or info.name, info.name, arguments)
        async with lane.turn(mode):
            batch = await run_calls(registry, scope, [call])
        return _output(render(batch.results[0]))

    strict, _ = strict_parameters(info.parameters)
    return FunctionTool(
        name=info.name,
        description=info.description,
        params_json_schema=info.parameters if strict is None else strict,
        on_invoke_tool=invoke,
        strict_json_schema=strict is not None,
    )


def _parsed(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return None  # toolray answers it with its own invalid-arguments result


def _output(rendered: Rendered) -> Any:
    """The result text, or the text and the images as the SDK's output items."""
    if not rendered.images:
        return rendered.text
    items: list[ToolOutputText | ToolOutputImage] = []
    if rendered.text:
        items.append(ToolOutputText(text=rendered.text))
    items += [ToolOutputImage(image_url=image.data_url) for image in rendered.images]
    return items
