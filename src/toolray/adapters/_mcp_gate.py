"""The HTTP edge of an MCP server: host checks, sessions and cancels, in front of the SDK.

Every MCP message is handled by the ``mcp`` SDK's streamable HTTP transport, run in its
stateless mode (each POST served on its own, so any replica can answer any request). This
module adds what makes sessions work on top of it, whichever replica answers:

- :class:`HostCheck` refuses a ``Host`` / ``Origin`` outside the allowed hosts (``421`` /
  ``403``: DNS rebinding), and any peer but this machine when the app has no authentication;
- :class:`SessionGate`, with sessions on, answers an ``initialize`` with a new
  ``Mcp-Session-Id`` (the session bound to the caller's principal, its scope a child of the
  tenant's with ``scope_per_session``), ``404`` for an id that is unknown, ended or
  another principal's, ``DELETE`` by ending the session, ``GET`` with ``405`` (the server
  sends nothing unasked), and refuses the sessionless 2026 protocol revision so clients fall
  back to the handshake. With or without sessions it takes a client's
  ``notifications/cancelled`` itself: the call it names is aborted (see :class:`InFlight`).
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from typing import Any, Final

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp_types import INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION, ErrorData, JSONRPCError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._mcp_auth import Caller, caller_of
from ._mcp_sessions import McpSession, cancel_key, request_key

__all__ = ("INFO_KEY", "HostCheck", "RequestInfo", "SessionGate", "security_settings")

INFO_KEY: Final = "toolray.mcp"
"""The ASGI scope key under which a request's :class:`RequestInfo` reaches the handlers."""

_LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")
_CANCELLED: Final = b"notifications/cancelled"
_TOOLS_CALL: Final = b"tools/call"
_EMPTY: Final = [(b"content-length", b"0")]


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo:
    """Who sent a request, its session if any, and the scope its calls run in."""

    caller: Caller
    session: McpSession | None
    scope: str | None
    cancel_key: str


def security_settings(allowed_hosts: list[str] | None) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding settings for ``allowed_hosts`` (``None``: this machine only).

    ``"*"`` turns the check off; ``"name:*"`` allows any port. Origins follow the hosts
    (``http://`` and ``https://``); a request without ``Origin`` (not a browser) passes.
    """
    if allowed_hosts is not None and "*" in allowed_hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = list(allowed_hosts) if allowed_hosts is not None else loopback_hosts()
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(allowed_hosts=hosts, allowed_origins=origins)


def loopback_hosts() -> list[str]:
    """The ``Host`` values of this machine: its loopback names, with any port or none."""
    return [*_LOOPBACK_NAMES, *(f"{name}:*" for name in _LOOPBACK_NAMES)]


def is_loopback_host(host: str) -> bool:
    """Whether an allowed-host entry (``name``, ``name:port``, ``name:*``) names this machine."""
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 or host.startswith("[") else host
    return name.strip("[]") in ("localhost", "::1") or _is_loopback_ip(name.strip("[]"))


def _is_loopback_ip(text: str) -> bool:
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


class HostCheck:
    """Refuse requests whose ``Host`` or ``Origin`` is not allowed (and remote peers, if asked)."""

    def __init__(
        self, app: ASGIApp, settings: TransportSecuritySettings, *, local_peers_only: bool
    ) -> None:
        self.app = app
        self._security = TransportSecurityMiddleware(settings)
        self._local_only = local_peers_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = await self._security.validate_request(Request(scope, receive))
            if refusal is None and self._local_only and not _local_peer(scope):
                refusal = Response("Forbidden: this server takes local clients only", 403)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _local_peer(scope: Scope) -> bool:
    client = scope.get("client")
    return client is not None and _is_loopback_ip(str(client[0]))


class SessionGate:
    """Sessions and cancels in front of the SDK's stateless transport (module docstring)."""

    def __init__(self, app: ASGIApp, core: Any) -> None:
        self.app = app
        self.core = core  # McpCore: settings, the session table, the calls in flight

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        caller = caller_of(scope, self.core.default_scope)
        if self.core.sessions_on:
            await self._with_sessions(scope, receive, send, caller)
            return
        key = cancel_key(None, caller.principal)
        if scope["method"] == "POST":
            body, receive = await read_body(receive)
            if await self._took_cancel(body, key, scope, receive, send):
                return
            send = self._hushing(send, key, body)
        scope[INFO_KEY] = RequestInfo(
            caller=caller, session=None, scope=caller.scope, cancel_key=key
        )
        await self.app(scope, receive, send)

    async def _with_sessions(
        self, scope: Scope, receive: Receive, send: Send, caller: Caller
    ) -> None:
        headers = Headers(scope=scope)
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER)
        if version is not None and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            await _refuse_revision(version)(scope, receive, send)
            return
        session_id = headers.get(MCP_SESSION_ID_HEADER)
        if session_id is None:
            await self._open(scope, receive, send, caller)
            return
        session = await self.core.store.touch(session_id, caller.principal)
        if session is None:
            await _error("Session not found", 404)(scope, receive, send)
            return
        method = scope["method"]
        if method == "DELETE":
            await self.core.end(session, "closed")
            await Response(status_code=200)(scope, receive, send)
            return
        if method != "POST":
            await Response(status_code=405, headers={"Allow": "POST, DELETE"})(scope, receive, send)
            return
        body, receive = await read_body(receive)
        key = cancel_key(session.id, "")
        if await self._took_cancel(body, key, scope, receive, send):
            return
        send = self._hushing(send, key, body)
        try:
            await self._serve(scope, receive, send, caller, session)
        finally:
            await self.core.store.touch(session_id, caller.principal)

    async def _open(self, scope: Scope, receive: Receive, send: Send, caller: Caller) -> None:
        """A request without a session: only an ``initialize`` POST, which opens one."""
        if scope["method"] == "POST":
            body, receive = await read_body(receive)
            message = _message(body)
            if message is not None and message.get("method") == "initialize" and "id" in message:
                session = await self.core.open(caller)
                opened = await self._serve(scope, receive, send, caller, session, opening=True)
                if not opened:
                    await self.core.end(session, "refused")
                return
        await _error("Bad Request: Missing session ID", 400)(scope, receive, send)

    async def _serve(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        caller: Caller,
        session: McpSession,
        *,
        opening: bool = False,
    ) -> bool:
        key = cancel_key(session.id, "")
        info = RequestInfo(caller=caller, session=session, scope=session.scope, cancel_key=key)
        scope[INFO_KEY] = info
        if not opening:
            with self.core.serving(session):
                await self.app(scope, receive, send)
            return True
        status: list[int] = []

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
                if message["status"] == 200:
                    header = (MCP_SESSION_ID_HEADER.encode(), session.id.encode())
                    message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        await self.app(scope, receive, send_with_id)
        return status == [200]

    def _hushing(self, send: Send, key: str, body: bytes) -> Send:
        """``send``, but a request its client cancelled is answered ``202`` with no reply.

        The MCP specification: no response to a cancelled request. A client that left its
        session meanwhile would otherwise get the aborted call's reply on a closed stream.
        """
        if _TOOLS_CALL not in body:  # not a call: no need to read it here
            return send
        message = _message(body)
        if message is None or message.get("method") != "tools/call" or "id" not in message:
            return send
        where = (key, request_key(message["id"]))
        inflight = self.core.inflight
        hushed = False

        async def hush(reply: Message) -> None:
            nonlocal hushed
            if reply["type"] == "http.response.start" and inflight.cancelled(*where):
                hushed = True
                await send({"type": reply["type"], "status": 202, "headers": _EMPTY})
                await send({"type": "http.response.body", "body": b""})
            elif not hushed:
                await send(reply)

        return hush

    async def _took_cancel(
        self, body: bytes, key: str, scope: Scope, receive: Receive, send: Send
    ) -> bool:
        """Whether ``body`` was a ``notifications/cancelled`` (then handled and answered 202)."""
        if _CANCELLED not in body:
            return False
        message = _message(body)
        if message is None or message.get("method") != "notifications/cancelled" or "id" in message:
            return False
        request_id = cancelled_request_id_from_params(message.get("params"))
        if request_id is not None:
            await self.core.cancel(key, request_key(request_id))
        await Response(status_code=202)(scope, receive, send)
        return True


async def read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's whole body, and a ``receive`` that gives it again (then the rest)."""
    chunks: list[bytes] = []
    queued: list[Message] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            queued.append(message)
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    queued.insert(0, {"type": "http.request", "body": body, "more_body": False})

    async def replay() -> Message:
        return queued.pop(0) if queued else await receive()

    return body, replay


def _message(body: bytes) -> dict[str, Any] | None:
    try:
        decoded = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return decoded if isinstance(decoded, dict) else None


def _error(message: str, status: int, code: int = INVALID_REQUEST) -> Response:
    """A JSON-RPC error without a request id, at an HTTP status (as the SDK answers)."""
    body = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=status,
        media_type="application/json",
    )


def _refuse_revision(version: str) -> Response:
    """The 2026 revision has no sessions: name the handshake revisions, so clients fall back."""
    data = {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS), "requested": version}
    error = ErrorData(
        code=UNSUPPORTED_PROTOCOL_VERSION, message="Unsupported protocol version", data=data
    )
    body = JSONRPCError(jsonrpc="2.0", id=None, error=error)
    return Response(
        body.model_dump_json(by_alias=True, exclude_unset=True),
        status_code=400,
        media_type="application/json",
    )
