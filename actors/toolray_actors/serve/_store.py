"""``RaySessions``: the MCP session table every replica of one app shares, on an actor.

The table is the core's ``LocalSessions`` hosted as a named async actor of the namespace
(``toolray_actors._handles.create_mcp_sessions``); each replica holds this client of it as
its ``SessionStore``. A session opened on one replica is found by the next request on any
other, ``DELETE`` and idle expiry end it for all, and a cancel that reaches a replica not
running its call is published to the one that does. A lookup costs one actor call (about
a millisecond here), paid only by requests that carry a session id.
"""

from __future__ import annotations

from typing import TypeVar, final

import ray
import ray.exceptions as rex

from toolray.adapters.mcp import CancelNotices, LocalSessions, McpSession
from toolray_actors._errors import translate
from toolray_actors._remote import Handle, send

__all__ = ("RaySessions",)

_R = TypeVar("_R")

_WHAT = "the MCP session table"


async def _answer(ref: ray.ObjectRef[_R]) -> _R:
    try:
        return await ref
    except rex.RayError as err:
        raise translate(err, _WHAT) from None


@final
class RaySessions:
    """A ``SessionStore`` whose table is the shared actor behind ``handle``."""

    def __init__(self, handle: Handle) -> None:
        self._table = handle

    async def open(self, session: McpSession) -> None:
        """Record a new session."""
        await _answer(send(self._table, LocalSessions.open, session))

    async def touch(self, session_id: str, owner: str) -> McpSession | None:
        """The live session of ``owner`` with that id (its last-seen time renewed), or None."""
        return await _answer(send(self._table, LocalSessions.touch, session_id, owner))

    async def close(self, session_id: str, owner: str | None) -> McpSession | None:
        """Forget the session; the record if it was live."""
        return await _answer(send(self._table, LocalSessions.close, session_id, owner))

    async def expired(self, idle_s: float) -> list[McpSession]:
        """Forget and return the sessions idle for longer than ``idle_s``."""
        return await _answer(send(self._table, LocalSessions.expired, idle_s))

    async def count(self) -> int:
        """How many sessions are live (on every replica)."""
        return await _answer(send(self._table, LocalSessions.count))

    async def publish_cancel(self, key: str, request_id: str) -> None:
        """Tell every replica that the call ``(key, request_id)`` is cancelled."""
        await _answer(send(self._table, LocalSessions.publish_cancel, key, request_id))

    async def next_cancels(self, after: int) -> CancelNotices:
        """The cancels published after ``after`` (the table waits a while for one)."""
        return await _answer(send(self._table, LocalSessions.next_cancels, after))
