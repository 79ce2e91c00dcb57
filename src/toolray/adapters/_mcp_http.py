"""``mcp_http_app``: a registry's tools served over MCP streamable HTTP, to tenants with tokens.

The app mounts the ``mcp`` SDK's streamable HTTP transport at ``/mcp``. In front of it, in
this order: the host check (DNS rebinding; ``421`` / ``403``), bearer authentication (``401``
with ``WWW-Authenticate``), the body limit (``413``), and the session gate (sessions bound to
their principal, cancels). Each request runs in the scope its token names — or in the
session's own child scope — so a tenant lists and calls its own tools only: a tool outside
its scope is an unknown tool, whatever its name. Every call is a one-call batch through the
registry's full pipeline (policies, deadlines, isolation), and a failure is an ``isError``
result with the pipeline's text. Each POST is answered with one JSON body (the transport's
JSON response mode, which every client supports): a call sends nothing before its result,
and an SSE stream per request would cost both sides CPU for nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

import anyio
import mcp.types as mcp_types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import RequestBodyLimitMiddleware
from opentelemetry.trace import StatusCode
from starlette.applications import Starlette
from starlette.routing import Route

from toolray import AbortController, ToolCall, __version__
from toolray.errors import ToolrayError
from toolray.otel._server import server_span

from ._mcp_core import McpCore, McpServerStats
from ._mcp_gate import (
    INFO_KEY,
    HostCheck,
    RequestInfo,
    SessionGate,
    is_loopback_host,
    security_settings,
)
from ._mcp_serve import call_result, run_call, tool_list
from ._mcp_sessions import LocalSessions, SessionStore, request_key

__all__ = ("McpHttpApp", "mcp_http_app")

MCP_PATH: Final = "/mcp"


class McpHttpApp(Starlette):
    """The ASGI app of :func:`mcp_http_app`: a Starlette app with its server's state.

    Mounted inside another app, run its lifespan there: ``lifespan=lambda app:
    mcp_app.run()`` (Starlette does not run a mounted app's lifespan).
    """

    def __init__(self, core: McpCore, manager: StreamableHTTPSessionManager, asgi: Any) -> None:
        self._core = core
        self._manager = manager
        super().__init__(routes=[Route(MCP_PATH, endpoint=asgi)], lifespan=self._lifespan)

    def _lifespan(self, app: Starlette) -> Any:
        return self.run()

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve: the SDK's session manager, the idle-session reaper, the cancel watcher."""
        async with self._manager.run(), anyio.create_task_group() as tasks:
            if self._core.sessions_on:
                tasks.start_soon(self._core.reap_forever)
            if not self._core.owns_store:  # replicas: a cancel may reach another one
                tasks.start_soon(self._core.watch_cancels)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
                await self._core.shutdown()

    def stats(self) -> McpServerStats:
        """This server's sessions, calls in flight and per-tenant counts."""
        return self._core.stats()


def mcp_http_app(
    registry: Any,
    *,
    scope: str | None = None,
    auth: Any,
    scope_per_session: bool = False,
    stateless: bool = True,
    allowed_hosts: list[str] | None = None,
    max_body_bytes: int = 4_194_304,
    session_idle_s: float = 600.0,
    sessions: SessionStore | None = None,
    name: str = "toolray",
) -> McpHttpApp:
    """An ASGI app serving ``registry``'s tools over MCP streamable HTTP at ``/mcp``.

    Args:
        registry: a ``ToolRegistry``, or the Ray layer's ``RemoteRegistry``.
        scope: the scope of a token whose claims name none (a generic ``TokenVerifier``'s,
            or every request's with ``auth=None``).
        auth: a :class:`BearerTokens` (each token names its scope) or any ``mcp``
            ``TokenVerifier``; ``None`` serves without authentication, which only this
            machine may use (loopback ``allowed_hosts`` and loopback peers only).
        scope_per_session: each MCP session calls in a child scope of its own,
            ``<scope>/mcp-<session id>`` (environments its own), disposed when the session
            ends; implies sessions whatever ``stateless`` says.
        stateless: no sessions: every request stands alone (any replica answers any request).
        allowed_hosts: the ``Host`` values accepted (``"name:*"`` for any port, ``"*"`` for
            any host); ``None``: this machine's loopback names only. Origins follow.
        max_body_bytes: a larger request body is answered ``413``.
        session_idle_s: a session with no request for this long ends.
        sessions: the session table (default: this process's own); the Ray layer passes
            one its replicas share.
        name: the server name announced to clients.

    Raises:
        TypeError: ``auth`` is not a token verifier.
        ValueError: ``auth=None`` with non-loopback ``allowed_hosts``, or a bad limit.
    """
    _check(auth, allowed_hosts, max_body_bytes, session_idle_s)
    sessions_on = scope_per_session or not stateless
    core = McpCore(
        registry,
        default_scope=scope,
        sessions_on=sessions_on,
        scope_per_session=scope_per_session,
        idle_s=session_idle_s,
        store=sessions if sessions is not None else LocalSessions(),
        owns_store=sessions is None,
    )
    settings = security_settings(allowed_hosts)
    manager = StreamableHTTPSessionManager(
        app=_server(core, name),
        stateless=True,
        json_response=True,
        security_settings=settings,
        max_request_body_size=max_body_bytes,
    )
    asgi: Any = SessionGate(manager.handle_request, core)
    asgi = RequestBodyLimitMiddleware(asgi, max_body_bytes)
    if auth is not None:
        from ._mcp_auth import require_bearer

        asgi = require_bearer(asgi, auth)
    asgi = HostCheck(asgi, settings, local_peers_only=auth is None)
    return McpHttpApp(core, manager, asgi)


def _check(auth: Any, allowed_hosts: list[str] | None, max_body_bytes: int, idle_s: float) -> None:
    if auth is None:
        if allowed_hosts is not None and not all(map(is_loopback_host, allowed_hosts)):
            raise ValueError(
                "auth=None serves without authentication: only on this machine (loopback "
                f"allowed_hosts), not {allowed_hosts}"
            )
    elif not callable(getattr(auth, "verify_token", None)):
        raise TypeError(
            "auth is a toolray.adapters.mcp.BearerTokens or an mcp TokenVerifier (an object "
            f"with async verify_token(token)), not {type(auth).__name__}"
        )
    if (
        isinstance(max_body_bytes, bool)
        or not isinstance(max_body_bytes, int)
        or max_body_bytes < 1
    ):
        raise ValueError(f"max_body_bytes is a positive number of bytes, not {max_body_bytes!r}")
    if not idle_s > 0:
        raise ValueError(f"session_idle_s is a positive number of seconds, not {idle_s!r}")


def _info(ctx: ServerRequestContext[Any]) -> RequestInfo:
    request = ctx.request
    info = request.scope.get(INFO_KEY) if request is not None else None
    if not isinstance(info, RequestInfo):
        raise RuntimeError("an MCP request reached toolray's handlers without its caller")
    return info


def _server(core: McpCore, name: str) -> Server:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: mcp_types.PaginatedRequestParams | None
    ) -> mcp_types.ListToolsResult:
        return tool_list(await core.off_loop(core.registry.schemas, _info(ctx).scope))

    async def call_tool(
        ctx: ServerRequestContext[Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        info = _info(ctx)
        call = ToolCall(f"mcp-{ctx.request_id}", params.name, json.dumps(params.arguments or {}))
        controller = AbortController()
        try:
            with core.inflight.add(info.cancel_key, request_key(ctx.request_id), controller):
                result = await run_call(core.registry, info.scope, call, controller)
        except ToolrayError as err:  # the runtime, not the tool (an executor lost, …)
            core.counted_call(info.caller.scope, failed=True)
            text = mcp_types.TextContent(text=f"Error: {err}")
            return mcp_types.CallToolResult(content=[text], is_error=True)
        core.counted_call(info.caller.scope, failed=result.is_error)
        return call_result(result)

    server = Server(name, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)
    server.middleware = [_Observe(core)]  # in place of the SDK's span: ours has the tenant
    return server


class _Observe:
    """A span per MCP request (the client's trace context its parent), counted per tenant."""

    def __init__(self, core: McpCore) -> None:
        self._core = core

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.request_id is None:  # a notification
            return await call_next(ctx)
        info = _info(ctx)
        self._core.counted_request(info.caller.scope)
        params = ctx.params or {}
        tool = params.get("name") if ctx.method == "tools/call" else None
        attributes: dict[str, Any] = {
            "mcp.method.name": ctx.method,
            "jsonrpc.request.id": str(ctx.request_id),
            "toolray.tenant": info.caller.scope or "",
        }
        if info.session is not None:
            attributes["mcp.session.id"] = info.session.id
        if isinstance(tool, str):
            attributes["gen_ai.operation.name"] = "execute_tool"
            attributes["gen_ai.tool.name"] = tool
        meta = params.get("_meta")
        carriers = [
            meta if isinstance(meta, dict) else {},
            dict(ctx.request.headers) if ctx.request else {},
        ]
        name = f"{ctx.method} {tool}" if isinstance(tool, str) else ctx.method
        with server_span(name, carriers=carriers, attributes=attributes) as span:
            result = await call_next(ctx)
            if isinstance(result, dict) and result.get("isError") is True:
                span.set_attribute("error.type", "tool_error")
                span.set_status(StatusCode.ERROR)
            return result
