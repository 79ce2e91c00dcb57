"""The state of one MCP HTTP server: its registry, sessions, calls in flight and counters.

:class:`McpCore` opens and ends sessions (a child scope per session with
``scope_per_session``, disposed when it ends, its environments with it), aborts the call a
cancel names (here, or on whichever replica runs it, through the shared session table),
reaps idle sessions, and counts per tenant what :meth:`McpCore.stats` reports and the Ray
layer exports as metrics.
"""

from __future__ import annotations

import contextlib
import functools
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar, final

import anyio

from toolray import ToolRegistry

from ._mcp_auth import Caller
from ._mcp_sessions import InFlight, McpSession, SessionStore, cancel_key

__all__ = ("McpCore", "McpServerStats", "TenantStats", "child_scope")

T = TypeVar("T")

CANCELLED_BY_CLIENT: Final = "the MCP client cancelled the call"
SESSION_ENDED: Final = "the MCP session ended"


@dataclass(frozen=True, slots=True, kw_only=True)
class TenantStats:
    """What one tenant (a scope named by tokens) did on this server."""

    requests: int = 0
    """MCP requests answered (``initialize``, ``tools/list``, ``tools/call``, …)."""
    calls: int = 0
    call_errors: int = 0
    """Calls answered with ``isError`` (a failure, a denial, an unknown tool, an abort)."""
    sessions_opened: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerStats:
    """A snapshot of one MCP HTTP server (one replica: its own counts)."""

    sessions_open: int
    """Sessions this server opened that have not ended."""
    sessions_opened: int
    sessions_closed: int
    """Ended by the client (``DELETE``) or refused at ``initialize``."""
    sessions_expired: int
    """Ended after ``session_idle_s`` without a request, or when the server stopped."""
    calls_in_flight: int
    tenants: dict[str, TenantStats] = field(default_factory=dict)
    """By tenant scope (``""`` for the global scope)."""


def child_scope(tenant: str | None, session_id: str) -> str:
    """The scope of a session with ``scope_per_session``: ``<tenant>/mcp-<session id>``."""
    return f"{tenant}/mcp-{session_id}" if tenant is not None else f"mcp-{session_id}"


@final
class McpCore:
    """Sessions, cancels and counters of one server (see the module docstring)."""

    def __init__(
        self,
        registry: Any,
        *,
        default_scope: str | None,
        sessions_on: bool,
        scope_per_session: bool,
        idle_s: float,
        store: SessionStore,
        owns_store: bool,
    ) -> None:
        self.registry = registry
        self.default_scope = default_scope
        self.sessions_on = sessions_on
        self.scope_per_session = scope_per_session
        self.idle_s = idle_s
        self.store = store
        self.owns_store = owns_store
        self.inflight = InFlight()
        self._inline = isinstance(registry, ToolRegistry)
        self._tenants: dict[str, dict[str, int]] = {}
        self._busy: dict[str, list[Any]] = {}  # session id -> [owner, requests in flight]
        self._sessions = {"opened": 0, "closed": 0, "expired": 0}

    async def off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``; in a thread when the registry's methods block (Ray's)."""
        if self._inline:
            return fn(*args, **kwargs)
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    # ------------------------------------------------------------------ sessions
    async def open(self, caller: Caller) -> McpSession:
        """A new session for ``caller`` (its own child scope with ``scope_per_session``)."""
        session_id = secrets.token_hex(16)
        scope = caller.scope
        if self.scope_per_session:
            scope = child_scope(caller.scope, session_id)
            await self.off_loop(self.registry.scope, scope, parent=caller.scope)
        session = McpSession(
            id=session_id,
            owner=caller.principal,
            tenant=caller.scope,
            scope=scope,
            child=self.scope_per_session,
            last_seen=time.time(),
        )
        await self.store.open(session)
        self._sessions["opened"] += 1
        self._count(caller.scope, "sessions_opened")
        return session

    async def end(self, session: McpSession, why: str) -> None:
        """End ``session``: forget it, abort its calls, dispose its own scope."""
        if why not in ("expired", "shutdown"):
            await self.store.close(session.id, None)
        self._sessions["expired" if why in ("expired", "shutdown") else "closed"] += 1
        self.inflight.cancel_all(cancel_key(session.id, ""), SESSION_ENDED)
        if session.child and session.scope is not None:
            handle = await self.off_loop(self.registry.scope, session.scope)
            await self.off_loop(handle.dispose)

    @contextlib.contextmanager
    def serving(self, session: McpSession) -> Iterator[None]:
        """While a request of ``session`` runs here, the reaper keeps the session alive."""
        entry = self._busy.setdefault(session.id, [session.owner, 0])
        entry[1] += 1
        try:
            yield
        finally:
            entry[1] -= 1
            if entry[1] == 0:
                self._busy.pop(session.id, None)

    async def cancel(self, key: str, request_id: str) -> None:
        """Abort the call ``(key, request_id)``: here, else on the replica that runs it."""
        if not self.inflight.cancel(key, request_id, CANCELLED_BY_CLIENT):
            await self.store.publish_cancel(key, request_id)

    async def reap_forever(self) -> None:
        """End the sessions idle for ``idle_s``, checking a few times per idle period."""
        period = max(0.05, min(self.idle_s / 4, 30.0))
        while True:
            await anyio.sleep(period)
            for session_id, (owner, _) in list(self._busy.items()):
                await self.store.touch(session_id, owner)  # a long call is not idleness
            for session in await self.store.expired(self.idle_s):
                await self.end(session, "expired")

    async def watch_cancels(self) -> None:
        """Apply the cancels other replicas publish to the calls running here."""
        after = 0
        while True:
            found = await self.store.next_cancels(after)
            after = found.last
            for notice in found.notices:
                self.inflight.cancel(notice.key, notice.request_id, CANCELLED_BY_CLIENT)

    async def shutdown(self) -> None:
        """The server stops: end every session of a table it owns (their scopes disposed)."""
        if not self.owns_store:
            return
        with anyio.CancelScope(shield=True):
            for session in await self.store.expired(-1.0):
                await self.end(session, "shutdown")

    # ------------------------------------------------------------------ counters
    def _count(self, tenant: str | None, what: str, by: int = 1) -> None:
        counts = self._tenants.setdefault(tenant or "", {})
        counts[what] = counts.get(what, 0) + by

    def counted_request(self, tenant: str | None) -> None:
        """One MCP request of ``tenant`` answered."""
        self._count(tenant, "requests")

    def counted_call(self, tenant: str | None, *, failed: bool) -> None:
        """One call of ``tenant`` ended (``failed``: answered with ``isError``)."""
        self._count(tenant, "calls")
        if failed:
            self._count(tenant, "call_errors")

    def stats(self) -> McpServerStats:
        """A snapshot of this server's sessions, calls in flight and per-tenant counts."""
        opened, closed, expired = (self._sessions[k] for k in ("opened", "closed", "expired"))
        return McpServerStats(
            sessions_open=opened - closed - expired,
            sessions_opened=opened,
            sessions_closed=closed,
            sessions_expired=expired,
            calls_in_flight=len(self.inflight),
            tenants={t: TenantStats(**counts) for t, counts in self._tenants.items()},
        )
