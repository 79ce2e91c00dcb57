"""``on_change`` on Ray: the registry's change events delivered to listeners in the driver.

The registry actor counts committed changes with the core's rules (see
``_registry_reads``). While a driver has listeners, one task on its portal loop long-polls
that count and runs every listener once per change, in the portal thread (a listener may
be sync or async). A write made through this driver returns only after its own change
was delivered, so ``register()`` followed by a check sees the event, as in-process; changes
made by other drivers arrive within one poll. Differences from the core (documented in
docs/parity.md): a listener runs after the change committed and cannot veto it (a raising
listener is logged, R-EVT-09's rollback does not apply), and events are not scope-filtered
(R-EVT-08) — exactly as in-process.

The feed stops when its last listener is disposed and when the runtime shuts down, quietly.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Callable

from toolray import Disposer
from toolray_actors.control._registry_actor import RegistryActor

from ._connection import Connection

__all__ = ("ChangeFeed",)

_log = logging.getLogger("toolray")

_POLL_S = 10.0
_DELIVERY_BOUND_S = 30.0


class ChangeFeed:
    """The change listeners of one runtime, and the poller that feeds them."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._listeners: list[Callable[[], object]] = []
        self._seen = 0
        self._task: asyncio.Task[None] | None = None
        self._cond = threading.Condition()
        self._closed = False

    # ------------------------------------------------------------------ listeners
    def add(self, listener: Callable[[], object]) -> Disposer:
        """Run ``listener`` after every committed change of the namespace's registry."""
        if not callable(listener):
            raise TypeError("on_change() takes a callable")
        start = not self._listeners
        seen = self._conn.call(RegistryActor.change_count) if start else None
        with self._cond:
            if seen is not None:
                self._seen = seen
            self._listeners.append(listener)
        if start:
            self._conn.portal.submit(self._start())
        return Disposer(lambda: self._remove(listener))

    def _remove(self, listener: Callable[[], object]) -> None:
        with self._cond:
            if listener in self._listeners:
                self._listeners.remove(listener)
            self._cond.notify_all()

    @property
    def active(self) -> bool:
        """Whether any listener is registered."""
        return bool(self._listeners)

    # ------------------------------------------------------------------ delivery
    def wait_delivered(self) -> None:
        """After a write of this driver: return once its change reached the listeners."""
        if not self._listeners or self._closed or self._conn.portal.in_loop():
            return
        target = self._conn.call(RegistryActor.change_count)
        with self._cond:
            self._cond.wait_for(
                lambda: self._seen >= target or not self._listeners or self._closed,
                timeout=_DELIVERY_BOUND_S,
            )

    async def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._poll())

    async def _poll(self) -> None:
        while self._listeners and not self._closed:
            try:
                count = await self._conn.acall(RegistryActor.wait_changes, self._seen, _POLL_S)
            except asyncio.CancelledError:
                raise
            except Exception:  # the namespace ended, or the runtime is shutting down
                _log.debug("toolray: change feed stopped", exc_info=True)
                return
            await self._deliver(int(count))

    async def _deliver(self, count: int) -> None:
        with self._cond:
            seen, listeners = self._seen, list(self._listeners)
        for _ in range(max(count - seen, 0)):
            for listener in listeners:
                await _run(listener)
        with self._cond:
            self._seen = count
            self._cond.notify_all()

    def close(self) -> None:
        """Stop delivering (idempotent, quiet): the runtime is shutting down."""
        self._closed = True
        with self._cond:
            self._listeners.clear()
            self._cond.notify_all()
        task, self._task = self._task, None
        if task is not None:
            self._conn.portal.cancel(task)


async def _run(listener: Callable[[], object]) -> None:
    try:
        outcome = listener()
        if inspect.isawaitable(outcome):
            await outcome
    except Exception:
        _log.warning("toolray: an on_change listener raised (the change stays)", exc_info=True)
