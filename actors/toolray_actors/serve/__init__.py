"""MCP over streamable HTTP on Ray Serve: ``deploy_mcp`` (the ``ray[serve]`` and ``mcp`` extras).

Example:
    >>> from toolray.adapters.mcp import BearerTokens          # doctest: +SKIP
    >>> from toolray_actors import RayRuntime
    >>> from toolray_actors.serve import deploy_mcp
    >>> with RayRuntime.start() as rt, deploy_mcp(
    ...     rt, auth=BearerTokens.from_file("tokens"), replicas=2
    ... ) as app:
    ...     print(app.url)
    http://127.0.0.1:8000/mcp
"""

from __future__ import annotations

from ._deploy import REPLICA_HEADER as REPLICA_HEADER
from ._deploy import McpDeployment as McpDeployment
from ._deploy import deploy_mcp as deploy_mcp

__all__ = ("REPLICA_HEADER", "McpDeployment", "deploy_mcp")
