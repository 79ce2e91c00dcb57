"""MCP in and out, on the official ``mcp`` SDK (``pip install "toolray[mcp]"``).

- :func:`import_mcp_tools` turns an MCP server's tools into toolray definitions whose
  bodies call the server (schemas mapped into the enforced subset, ``readOnlyHint`` →
  concurrency-safe, structured content → value, content → blocks, ``isError`` → failure,
  cancellation forwarded to the server);
- :func:`serve_mcp` exposes a registry scope as an MCP stdio server, every call going
  through the full pipeline.

Example:
    Import the tools of a stdio server and run a call through a registry batch::

        params = StdioServerParameters(command="python", args=["server.py"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for definition in await import_mcp_tools(session, prefix="files"):
                registry.register(definition)
            result = await registry.execute_batch(batch)
"""

from __future__ import annotations

from ._mcp_import import McpConnector as McpConnector
from ._mcp_import import McpToolError as McpToolError
from ._mcp_import import import_mcp_tools as import_mcp_tools
from ._mcp_import import list_mcp_tools as list_mcp_tools
from ._mcp_import import mcp_tool_definitions as mcp_tool_definitions
from ._mcp_serve import build_mcp_server as build_mcp_server
from ._mcp_serve import serve_mcp as serve_mcp
from ._mcp_serve import serve_mcp_async as serve_mcp_async

__all__ = (
    "McpConnector",
    "McpToolError",
    "build_mcp_server",
    "import_mcp_tools",
    "list_mcp_tools",
    "mcp_tool_definitions",
    "serve_mcp",
    "serve_mcp_async",
)
