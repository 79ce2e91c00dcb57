"""MCP sessions of a toolray server: a table any replica can read, and calls in flight.

A session is opened by an ``initialize`` request, bound to the principal whose token opened
it, and names the scope its calls run in (a child scope of its own with
``scope_per_session``). The table is a :class:`SessionStore`: :class:`LocalSessions` in one
process; the Ray layer shares one between replicas, so a session works whichever replica
answers. A session ends with an HTTP ``DELETE``, or when no request of it started or ended
for the idle time; its scope is disposed then (its environments close with it).

:class:`InFlight` finds the call a client's ``notifications/cancelled`` names: by session
and request id, or — without sessions — by principal and request id, aborting only an
unambiguous match (two clients sharing a token may use the same request ids).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from dataclasses import dataclass, replace
from typing import Protocol, final, runtime_checkable

from toolray import AbortController, Disposer

__all__ = (
    "CancelNotice",
    "CancelNotices",
    "InFlight",
    "LocalSessions",
    "McpSession",
    "SessionStore",
    "cancel_key",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpSession:
    """One MCP session: its id, its owner (a principal), its tenant and the scope it calls."""

    id: str
    owner: str
    tenant: str | None
    scope: str | None
    child: bool
    """Whether ``scope`` is the session's own (disposed when the session ends)."""
    last_seen: float
    """``time.time()`` when a request of it last started or ended."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelNotice:
    """A client cancelled the call ``(key, request_id)`` (a session's, or a principal's)."""

    key: str
    request_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CancelNotices:
    """The cancels published after some sequence number, and the last number."""

    last: int
    notices: tuple[CancelNotice, ...]


@runtime_checkable
class SessionStore(Protocol):
    """The session table of one server (or of every replica of one server)."""

    async def open(self, session: McpSession) -> None:
        """Record a new session."""

    async def touch(self, session_id: str, owner: str) -> McpSession | None:
        """The live session ``session_id`` of ``owner`` (its last-seen time renewed), or None."""

    async def close(self, session_id: str, owner: str | None) -> McpSession | None:
        """Forget the session (``owner`` None: whoever owns it); the record if it was live."""

    async def expired(self, idle_s: float) -> list[McpSession]:
        """Forget and return every session idle for longer than ``idle_s`` seconds."""

    async def count(self) -> int:
        """How many sessions are live."""

    async def publish_cancel(self, key: str, request_id: str) -> None:
        """Tell every replica that the call ``(key, request_id)`` is cancelled."""

    async def next_cancels(self, after: int) -> CancelNotices:
        """The cancels published after number ``after`` (waiting a while for one)."""


@final
class LocalSessions:
    """The session table of a server in one process (the Ray layer hosts one as an actor).

    Cancels are kept in a bounded log (the last ``keep_cancels``), waited on by every
    replica's watcher.
    """

    def __init__(self, *, keep_cancels: int = 1024, wait_s: float = 10.0) -> None:
        self._live: dict[str, McpSession] = {}
        self._cancels: deque[tuple[int, CancelNotice]] = deque(maxlen=keep_cancels)
        self._last = 0
        self._posted: asyncio.Event | None = None
        self._wait_s = wait_s

    async def open(self, session: McpSession) -> None:
        """Record a new session."""
        self._live[session.id] = session

    async def touch(self, session_id: str, owner: str) -> McpSession | None:
        """The live session of ``owner`` with that id, its last-seen time renewed."""
        found = self._live.get(session_id)
        if found is None or found.owner != owner:
            return None
        found = self._live[session_id] = replace(found, last_seen=time.time())
        return found

    async def close(self, session_id: str, owner: str | None) -> McpSession | None:
        """Forget the session; the record if it was live (and ``owner``'s)."""
        found = self._live.get(session_id)
        if found is None or (owner is not None and found.owner != owner):
            return None
        return self._live.pop(session_id)

    async def expired(self, idle_s: float) -> list[McpSession]:
        """Forget and return the sessions idle for longer than ``idle_s``."""
        cutoff = time.time() - idle_s
        gone = [s for s in self._live.values() if s.last_seen < cutoff]
        for session in gone:
            del self._live[session.id]
        return gone

    async def count(self) -> int:
        """How many sessions are live."""
        return len(self._live)

    async def publish_cancel(self, key: str, request_id: str) -> None:
        """Log a cancel for every watcher (the replica running the call applies it)."""
        self._last += 1
        self._cancels.append((self._last, CancelNotice(key=key, request_id=request_id)))
        posted, self._posted = self._posted, None
        if posted is not None:
            posted.set()

    async def next_cancels(self, after: int) -> CancelNotices:
        """The cancels logged after ``after``, waiting up to ``wait_s`` for one."""
        if self._last <= after:
            if self._posted is None:
                self._posted = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._posted.wait(), self._wait_s)
        notices = tuple(notice for number, notice in self._cancels if number > after)
        return CancelNotices(last=self._last, notices=notices)


def cancel_key(session_id: str | None, principal: str) -> str:
    """Whose request ids a cancel names: the session's, else the principal's (stateless)."""
    return f"session:{session_id}" if session_id is not None else f"principal:{principal}"


def request_key(request_id: object) -> str:
    """A JSON-RPC request id as text (``1`` and ``"1"`` stay different)."""
    return json.dumps(request_id)


_HUSHED = 4096
"""Cancelled calls whose replies are yet to start that a server remembers."""


@final
class InFlight:
    """The calls a server is running, by (cancel key, request id)."""

    def __init__(self) -> None:
        self._calls: dict[tuple[str, str], list[AbortController]] = {}
        self._cancelled: dict[tuple[str, str], None] = {}  # oldest first, at most _HUSHED

    def add(self, key: str, request_id: str, controller: AbortController) -> Disposer:
        """Register a running call; the disposer forgets it."""
        where = (key, request_id)
        self._calls.setdefault(where, []).append(controller)

        def forget() -> None:
            calls = self._calls.get(where, [])
            if controller in calls:
                calls.remove(controller)
            if not calls:
                self._calls.pop(where, None)

        return Disposer(forget)

    def cancel(self, key: str, request_id: str, reason: str) -> bool:
        """Abort the one call so named; False when none (or more than one) matches."""
        calls = self._calls.get((key, request_id), [])
        if len(calls) != 1:
            return False
        calls[0].abort(reason)
        self._cancelled[(key, request_id)] = None
        while len(self._cancelled) > _HUSHED:  # replies that never started: forget them
            del self._cancelled[next(iter(self._cancelled))]
        return True

    def cancelled(self, key: str, request_id: str) -> bool:
        """Whether the call so named was cancelled by its client (asked once, by its reply)."""
        return self._cancelled.pop((key, request_id), 0) is None

    def cancel_all(self, key: str, reason: str) -> int:
        """Abort every call of ``key`` (a session that ended); how many there were."""
        found = [c for (k, _), calls in self._calls.items() if k == key for c in calls]
        for controller in found:
            controller.abort(reason)
        return len(found)

    def __len__(self) -> int:
        return sum(len(calls) for calls in self._calls.values())
