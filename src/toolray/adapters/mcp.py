"""MCP in and out, on the official ``mcp`` SDK (``pip install "toolray[mcp]"``).

- :func:`import_mcp_tools` turns an MCP server's tools into toolray definitions whose
  bodies call the server (schemas mapped into the enforced subset, ``readOnlyHint`` →
  concurrency-safe, structured content → value, content → blocks, ``isError`` → failure,
  cancellation forwarded to the server);
- :func:`serve_mcp` exposes a registry scope as an MCP stdio server, every call going
  through the full pipeline;
- :func:`mcp_http_app` serves a registry over MCP streamable HTTP (an ASGI app, the SDK's
  transport at ``/mcp``) to clients with tokens: :class:`BearerTokens` (or any ``mcp``
  ``TokenVerifier``) names each token's scope, and its client lists and calls that scope's
  tools only; sessions (optionally a child scope each) any replica can serve;
- :func:`http_connector` is MCP in over streamable HTTP, for :func:`import_mcp_tools`: one
  pooled session per process, reopened when it drops.

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

from ._mcp_auth import SCOPE_CLAIM as SCOPE_CLAIM
from ._mcp_auth import BearerTokens as BearerTokens
from ._mcp_auth import TokenFileError as TokenFileError
from ._mcp_connect import HttpConnector as HttpConnector
from ._mcp_connect import McpConnectError as McpConnectError
from ._mcp_connect import close_http_sessions as close_http_sessions
from ._mcp_connect import http_connector as http_connector
from ._mcp_connect import open_http_sessions as open_http_sessions
from ._mcp_core import McpServerStats as McpServerStats
from ._mcp_core import TenantStats as TenantStats
from ._mcp_core import child_scope as child_scope
from ._mcp_http import McpHttpApp as McpHttpApp
from ._mcp_http import mcp_http_app as mcp_http_app
from ._mcp_import import McpConnector as McpConnector
from ._mcp_import import McpToolError as McpToolError
from ._mcp_import import import_mcp_tools as import_mcp_tools
from ._mcp_import import list_mcp_tools as list_mcp_tools
from ._mcp_import import mcp_tool_definitions as mcp_tool_definitions
from ._mcp_serve import build_mcp_server as build_mcp_server
from ._mcp_serve import serve_mcp as serve_mcp
from ._mcp_serve import serve_mcp_async as serve_mcp_async
from ._mcp_sessions import CancelNotice as CancelNotice
from ._mcp_sessions import CancelNotices as CancelNotices
from ._mcp_sessions import LocalSessions as LocalSessions
from ._mcp_sessions import McpSession as McpSession
from ._mcp_sessions import SessionStore as SessionStore

__all__ = (
    "SCOPE_CLAIM",
    "BearerTokens",
    "CancelNotice",
    "CancelNotices",
    "HttpConnector",
    "LocalSessions",
    "McpConnectError",
    "McpConnector",
    "McpHttpApp",
    "McpServerStats",
    "McpSession",
    "McpToolError",
    "SessionStore",
    "TenantStats",
    "TokenFileError",
    "build_mcp_server",
    "child_scope",
    "close_http_sessions",
    "http_connector",
    "import_mcp_tools",
    "list_mcp_tools",
    "mcp_http_app",
    "mcp_tool_definitions",
    "open_http_sessions",
    "serve_mcp",
    "serve_mcp_async",
)
