"""MCP out: a registry scope served as an MCP server.

``tools/list`` answers with ``registry.schemas(scope)``: exactly what a model of that scope
is shown (restrictions, conditional registrations and the presentation mode included).
``tools/call`` runs the call as a one-call batch through ``registry.execute_batch``, so the
scope's executor, guards, approval, hooks, policies and event log all apply, and a denial or
failure comes back as an ``isError`` result carrying the pipeline's text. A client's
``notifications/cancelled`` aborts the call's signal; the batch settles before the request
ends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import mcp.types as mcp_types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from toolray import AbortController, ToolBatchInput, ToolCall, ToolExecutionResult

__all__ = (
    "build_mcp_server",
    "call_result",
    "run_call",
    "serve_mcp",
    "serve_mcp_async",
    "tool_list",
)


def build_mcp_server(registry: Any, scope: str | None = None, *, name: str = "toolray") -> Server:
    """A low-level ``mcp`` server whose tools are ``scope``'s view of ``registry``.

    Args:
        registry: a ``ToolRegistry`` (or the Ray ``RemoteRegistry``): anything with
            ``schemas(scope)`` and ``await execute_batch(batch)``.
        scope: the agent scope to expose (``None``: the global context).
        name: the server name announced to clients.

    Returns:
        The server, to run on any transport (:func:`serve_mcp` runs it on stdio).
    """

    async def list_tools(
        ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return tool_list(registry.schemas(scope))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        call = ToolCall(f"mcp-{ctx.request_id}", params.name, json.dumps(params.arguments or {}))
        return call_result(await run_call(registry, scope, call))

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def tool_list(schemas: list[dict[str, Any]]) -> mcp_types.ListToolsResult:
    """A scope's tool schemas (``registry.schemas(scope)``) as an MCP tool list."""
    return mcp_types.ListToolsResult(
        tools=[
            mcp_types.Tool(
                name=schema["name"],
                description=schema["description"],
                input_schema=schema["parameters"],
            )
            for schema in schemas
        ]
    )


async def run_call(
    registry: Any, scope: str | None, call: ToolCall, controller: AbortController | None = None
) -> ToolExecutionResult:
    """One call as a batch; the client's cancellation aborts it, and it settles first.

    ``controller`` (a new one by default) aborts the call when something else fires it.
    """
    controller = controller or AbortController()
    batch = ToolBatchInput([call], controller.signal, scope=scope)
    task = asyncio.ensure_future(registry.execute_batch(batch))
    try:
        result = await asyncio.shield(task)
    except anyio.get_cancelled_exc_class():
        controller.abort("the MCP client cancelled the call")
        with anyio.CancelScope(shield=True):
            await task
        raise
    return result.results[0].result  # type: ignore[no-any-return]


def call_result(result: ToolExecutionResult) -> mcp_types.CallToolResult:
    """A call's result as MCP: content blocks, the value when structured, ``isError``."""
    content: list[mcp_types.ContentBlock] = [_mcp_block(block) for block in result.content]
    structured = None
    if not result.is_error:
        value = json.loads(json.dumps(result.value))
        structured = value if isinstance(value, dict) else None
    return mcp_types.CallToolResult(
        content=content, structured_content=structured, is_error=result.is_error
    )


def _mcp_block(block: Any) -> mcp_types.TextContent | mcp_types.ImageContent:
    if block.get("type") == "text":
        return mcp_types.TextContent(text=str(block.get("text", "")))
    if block.get("type") == "image":
        return mcp_types.ImageContent(data=block["data"], mime_type=block["mimeType"])
    return mcp_types.TextContent(text=json.dumps(block))


async def serve_mcp_async(
    registry: Any, scope: str | None = None, *, name: str = "toolray"
) -> None:
    """Serve ``scope``'s tools over this process's stdin/stdout until the client closes.

    The coroutine form of :func:`serve_mcp`, for a program that already runs an event loop.
    """
    server = build_mcp_server(registry, scope, name=name)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def serve_mcp(registry: Any, scope: str | None = None, *, name: str = "toolray") -> None:
    """Serve ``scope``'s tools as an MCP stdio server; returns when the client closes.

    Every call goes through the full pipeline of ``registry`` (see the module docstring).
    While serving, stray writes to stdout go to stderr, so they cannot corrupt the protocol.

    Args:
        registry: a ``ToolRegistry`` (or the Ray ``RemoteRegistry``).
        scope: the agent scope to expose (``None``: the global context).
        name: the server name announced to clients.

    Raises:
        RuntimeError: called inside a running event loop (use ``await serve_mcp_async()``).

    Example:
        A server script, which any MCP client can start (``command: python, args:
        [server.py]``)::

            registry = ToolRegistry()
            registry.register(my_tool)
            serve_mcp(registry)
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "serve_mcp() blocks until the client closes; in a running event loop use"
            " await serve_mcp_async(...)"
        )
    anyio.run(_serve, registry, scope, name)


async def _serve(registry: Any, scope: str | None, name: str) -> None:
    await serve_mcp_async(registry, scope, name=name)
