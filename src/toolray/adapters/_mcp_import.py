"""MCP in: an MCP server's tools as toolray definitions whose bodies call the server.

Each MCP ``Tool`` becomes a ``ToolDefinition`` made by ``define_tool``, so arguments are
validated locally before the server sees them and every call runs the full pipeline:

- ``inputSchema`` → parameters, through ``json_schema_parameters(schema, relax=True)``:
  value constraints the subset cannot check (``minimum``, ``pattern``, ``format``…) are
  dropped and listed in the property's description (the server still enforces them); a
  schema that still cannot be mapped raises ``ValueError`` naming the tool and every place;
- ``outputSchema`` → the output schema, and the call's ``structuredContent`` is the value
  (rendered to the model as its JSON text). An output schema outside the subset is not
  re-checked here (the SDK already validates structured content against it). Without an
  output schema, the value is the call's content as toolray blocks (text and image; audio
  and resources become text notes), and the model reads those blocks;
- ``annotations.readOnlyHint`` → concurrency-safe: read-only calls of one batch run in
  parallel, every other MCP tool is exclusive;
- ``isError`` → a failure (:class:`McpToolError`, code ``MCP_TOOL_ERROR``) whose message is
  the server's text (less a leading ``Error:``, which the failure's content adds);
- the body's ``ctx.signal`` firing cancels the request, which the SDK forwards to the server
  as ``notifications/cancelled``; the call ends ``ABORTED`` (or ``TOOL_TIMEOUT``).

A body reaches its server through a *connector*: an async callable returning a live
``ClientSession``, or an ``HttpConnector`` (``http_connector``: the process's pooled
session on a streamable HTTP server). :func:`import_mcp_tools` uses the session or
connector it was given; another connector (one that opens a session per worker process
from ``StdioServerParameters``) can be passed to :func:`mcp_tool_definitions` to run the
same definitions elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Any, Final

import mcp.types as mcp_types
from mcp import ClientSession

from toolray import (
    AbortSignal,
    ContentBlock,
    HarnessError,
    JsonSchemaError,
    Placement,
    ToolDefinition,
    ToolOutput,
    define_tool,
    json_schema_parameters,
    text_block,
)

from ._mcp_connect import HttpConnector, call_tool_cancellable, list_mcp_tools

__all__ = (
    "McpConnector",
    "McpToolError",
    "import_mcp_tools",
    "list_mcp_tools",
    "mcp_tool_definitions",
)

McpConnector = Callable[[], Awaitable[ClientSession]]
"""Returns the live session a tool body calls (it may open one on first use)."""

_BLOCKS_SCHEMA: Final = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {"type": {"type": "string"}},
        "required": ["type"],
        "additionalProperties": True,
    },
}


class McpToolError(HarnessError):
    """An MCP tool call that the server answered with ``isError: true``."""

    default_code = "MCP_TOOL_ERROR"


async def import_mcp_tools(
    session: ClientSession | McpConnector | HttpConnector,
    *,
    prefix: str | None = None,
    include: Collection[str] | None = None,
) -> list[ToolDefinition]:
    """Definitions for the tools of an MCP server, bodies calling it through ``session``.

    Args:
        session: an initialized ``mcp.ClientSession`` (it must stay open, on this event
            loop, for as long as the definitions are called), a connector (an async callable
            returning a live session), or ``http_connector(url, headers=...)``: then each
            process that runs a body keeps one pooled session per server, so the
            definitions run on Ray workers too.
        prefix: toolray names become ``f"{prefix}_{name}"`` (the server is called with its
            own name), so tools of several servers cannot collide.
        include: import only these server tool names (all by default); a way past a tool
            whose schema cannot be mapped.

    Returns:
        One definition per server tool, in the server's order (every page of
        ``tools/list``), ready for ``registry.register``.

    Raises:
        ValueError: a tool's ``inputSchema`` cannot be mapped into the enforced subset (the
            message names the tool and every place).
    """
    if isinstance(session, HttpConnector):
        tools = await session.list_tools()
        return mcp_tool_definitions(tools, session, prefix=prefix, include=include)
    if isinstance(session, ClientSession):
        opened = session

        async def current() -> ClientSession:
            return opened

        connect: McpConnector = current
    else:
        connect = session
        opened = await connect()
    return mcp_tool_definitions(
        await list_mcp_tools(opened), connect, prefix=prefix, include=include
    )


def mcp_tool_definitions(
    tools: Sequence[mcp_types.Tool],
    connect: McpConnector | HttpConnector,
    *,
    prefix: str | None = None,
    include: Collection[str] | None = None,
    placement: Placement | None = None,
) -> list[ToolDefinition]:
    """Definitions for listed MCP tools whose bodies call ``await connect()``'s session.

    The definitions hold only ``connect`` and plain data, so with a picklable connector
    (say, one that opens a per-process session from ``StdioServerParameters``) they can be
    shipped to other processes; ``placement`` then names the worker pool that runs them.

    Raises:
        ValueError: a tool's ``inputSchema`` cannot be mapped into the enforced subset.
    """
    return [
        _definition(tool, connect, prefix, placement)
        for tool in tools
        if include is None or tool.name in include
    ]


def _definition(
    tool: mcp_types.Tool,
    connect: McpConnector | HttpConnector,
    prefix: str | None,
    placement: Placement | None,
) -> ToolDefinition:
    try:
        parameters = json_schema_parameters(tool.input_schema, relax=True)
    except JsonSchemaError as err:
        raise ValueError(
            f'MCP tool "{tool.name}": its inputSchema cannot be mapped into the enforced'
            f" JSON-Schema subset: {'; '.join(err.violations)} (leave it out with include=)"
        ) from None
    structured = tool.output_schema is not None
    read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
    definition = define_tool(
        name=f"{prefix}_{tool.name}" if prefix else tool.name,
        description=tool.description or None,
        parameters=parameters,
        output=ToolOutput(schema={"type": "json"}, render=_render_blocks),
        execute=_body(tool.name, connect, structured),
        placement=placement,
    )
    output = ToolOutput(
        schema=_output_schema(tool.output_schema) if structured else _BLOCKS_SCHEMA,
        render=_render_json if structured else _render_blocks,
    )
    # Read-only is a property of the tool, whatever the arguments: no validating wrapper.
    safe = _read_only if read_only else None
    return dataclasses.replace(definition, output=output, is_concurrency_safe=safe)


def _read_only(args: Any) -> bool:
    return True


def _output_schema(schema: dict[str, Any] | None) -> dict[str, Any]:
    try:
        return json_schema_parameters(schema or {}, relax=True).schema
    except JsonSchemaError:
        return {}  # any JSON value: the SDK has validated it against the server's schema


def _render_json(args: Any, value: Any) -> list[ContentBlock]:
    return [text_block(json.dumps(value, ensure_ascii=False))]


def _render_blocks(args: Any, value: Any) -> list[ContentBlock]:
    return [dict(block) for block in value]


def _body(
    name: str, connect: McpConnector | HttpConnector, structured: bool
) -> Callable[..., Awaitable[Any]]:
    async def call_server(args: Any, ctx: Any) -> Any:
        arguments = json.loads(json.dumps(args))
        result = await _call(connect, name, arguments, ctx.signal)
        content = blocks_from_mcp(result.content)
        if result.is_error:
            raise McpToolError(_error_message(name, content))
        if not structured:
            return content
        if result.structured_content is None:
            raise McpToolError(f'MCP tool "{name}" declared an outputSchema but sent no value')
        return result.structured_content

    return call_server


async def _call(
    connect: McpConnector | HttpConnector,
    name: str,
    arguments: dict[str, Any],
    signal: AbortSignal,
) -> mcp_types.CallToolResult:
    """The call through ``connect``: its process's pooled session, or the session it returns."""
    if isinstance(connect, HttpConnector):
        return await connect.call_tool(name, arguments, signal)
    return await call_tool_cancellable(await connect(), name, arguments, signal)


def _error_message(name: str, content: list[ContentBlock]) -> str:
    """The server's error text, less the ``Error:`` that the failure's content adds again."""
    text = "\n".join(block["text"] for block in content if block["type"] == "text")
    return text.removeprefix("Error: ") or f'MCP tool "{name}" failed'


def blocks_from_mcp(content: Sequence[Any]) -> list[ContentBlock]:
    """MCP content as toolray blocks: text and images kept, the rest as text notes."""
    return [_block(item.model_dump(mode="json", by_alias=True)) for item in content]


def _block(item: dict[str, Any]) -> ContentBlock:
    kind = item.get("type")
    if kind == "text":
        return text_block(item["text"])
    if kind == "image":
        return {"type": "image", "data": item["data"], "mimeType": item["mimeType"]}
    if kind == "resource":
        resource = item["resource"]
        if "text" in resource:
            return text_block(resource["text"])
        mime = resource.get("mimeType") or "application/octet-stream"
        if mime.startswith("image/"):
            return {"type": "image", "data": resource["blob"], "mimeType": mime}
        return text_block(f"[resource {resource.get('uri')} ({mime}): binary, not shown]")
    if kind == "resource_link":
        return text_block(f"[resource link: {item.get('uri')} ({item.get('name')})]")
    return text_block(f"[{kind} content ({item.get('mimeType', 'unknown type')}): not shown]")
