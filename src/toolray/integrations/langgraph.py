"""LangGraph: a node that runs an AI message's tool calls as one toolray batch.

``builder.add_node("tools", ToolrayToolNode(source, scope))`` takes the place of LangGraph's
``ToolNode``: it reads the last ``AIMessage`` of the state, runs **all** its tool calls as
one toolray batch — toolray plans them into parallel groups and exclusive barriers and runs
them through the scope's pipeline (in-process, or on Ray with process isolation and
kill-able timeouts) — and returns one ``ToolMessage`` per call, in the message's order, with
the matching ``tool_call_id``. A failed call is a ``ToolMessage`` with ``status="error"``
and toolray's ``Error: …`` text; the graph goes on. A success carries its canonical value
(plain JSON) as the message's ``artifact``.

The node takes the state shapes ``ToolNode`` takes: a list of messages (it returns a list),
a mapping or an object with a ``messages`` key or attribute (it returns
``{"messages": [...]}``), or a list of tool-call dicts. ``node.tool_schemas()`` gives the
scope's tools as OpenAI function tools, for ``model.bind_tools(...)``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig

from toolray import ToolBatchResult, ToolCall
from toolray.adapters.openai import tools_for_openai

from ._render import Rendered, render_all
from ._source import check_scope, read_tools_now, registry_of, run_calls

__all__ = ("ToolrayToolNode",)

T = TypeVar("T")


class ToolrayToolNode(Runnable[Any, Any]):
    """A LangGraph node running the last AI message's tool calls as one toolray batch.

    Args:
        source: a ``ToolRegistry`` (in-process) or a ``RayRuntime`` (the scope's executor
            actor and worker pools).
        scope: the agent scope whose pipeline runs the calls; ``None`` is the global scope.
        name: the node's name (``builder.add_node(node)`` uses it).
        messages_key: the state key (or attribute) holding the messages.

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> from toolray import ToolRegistry, tool
        >>> @tool(concurrency_safe=True)
        ... def double(n: int) -> int:
        ...     '''Twice n.'''
        ...     return 2 * n
        >>> registry = ToolRegistry()
        >>> _ = registry.register(double)
        >>> calls = [{"id": f"c{n}", "name": "double", "args": {"n": n}} for n in (1, 2)]
        >>> messages = ToolrayToolNode(registry).invoke([AIMessage("", tool_calls=calls)])
        >>> [(m.tool_call_id, m.content, m.status) for m in messages]
        [('c1', '2', 'success'), ('c2', '4', 'success')]
    """

    def __init__(
        self,
        source: object,
        scope: str | None = None,
        *,
        name: str = "tools",
        messages_key: str = "messages",
    ) -> None:
        self._registry = registry_of(source, "ToolrayToolNode")
        self._scope = check_scope(scope, "ToolrayToolNode")
        self.name = name
        self._messages_key = messages_key

    @property
    def scope(self) -> str | None:
        """The toolray scope whose pipeline runs the calls."""
        return self._scope

    def __repr__(self) -> str:
        return f"ToolrayToolNode(scope={self._scope!r}, name={self.name!r})"

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The tools the scope presents, as OpenAI function tools (``model.bind_tools``)."""
        presented = {info.name for info in read_tools_now(self._registry, self._scope)}
        tools = tools_for_openai(self._registry, self._scope, strict=False)
        return [tool for tool in tools if tool["function"]["name"] in presented]

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the calls and return the tool messages (from a script or a sync graph)."""
        calls, as_list = self._parse(input)
        batch = _run_sync(lambda: run_calls(self._registry, self._scope, _tool_calls(calls)))
        return self._output(calls, batch, as_list)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the calls and return the tool messages (an async graph)."""
        calls, as_list = self._parse(input)
        batch = await run_calls(self._registry, self._scope, _tool_calls(calls))
        return self._output(calls, batch, as_list)

    def _parse(self, input: Any) -> tuple[list[Mapping[str, Any]], bool]:
        """The tool calls to run, and whether the input was a list of messages."""
        if isinstance(input, list) and input and _is_tool_call(input[-1]):
            return list(input), True
        if isinstance(input, list):
            messages: Any = input
        elif isinstance(input, Mapping):
            messages = input.get(self._messages_key)
        else:
            messages = getattr(input, self._messages_key, None)
        if not isinstance(messages, Sequence) or not messages:
            raise ValueError(f"ToolrayToolNode: no messages in the input ({type(input).__name__})")
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None:
            raise ValueError("ToolrayToolNode: no AIMessage in the input")
        return list(last.tool_calls), isinstance(input, list)

    def _output(self, calls: list[Mapping[str, Any]], batch: ToolBatchResult, as_list: bool) -> Any:
        messages = [
            _message(call, rendered)
            for call, rendered in zip(calls, render_all(batch), strict=True)
        ]
        return messages if as_list else {self._messages_key: messages}


def _is_tool_call(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("type") == "tool_call"


def _call_id(call: Mapping[str, Any], index: int) -> str:
    call_id = call.get("id")
    return call_id if isinstance(call_id, str) and call_id else f"call_{index}"


def _tool_calls(calls: list[Mapping[str, Any]]) -> list[ToolCall]:
    return [
        ToolCall(_call_id(call, index), str(call.get("name", "")), call.get("args", {}))
        for index, call in enumerate(calls)
    ]


def _message(call: Mapping[str, Any], rendered: Rendered) -> ToolMessage:
    content: str | list[str | dict[str, Any]] = rendered.text
    if rendered.images:
        blocks: list[str | dict[str, Any]] = [{"type": "text", "text": rendered.text}]
        blocks += [
            {"type": "image", "base64": image.data, "mime_type": image.mime_type}
            for image in rendered.images
        ]
        content = blocks
    return ToolMessage(
        content=content,
        tool_call_id=rendered.call_id,
        name=str(call.get("name", "")),
        status="error" if rendered.is_error else "success",
        artifact=rendered.value,
    )


def _run_sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end from synchronous code, even under a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
