"""Backpressure: how many of one driver's batches may be in flight on one executor actor.

A driver can submit batches far faster than a farm runs them (100,000 agents at once). Each
batch an executor actor holds costs it memory for as long as it waits there, so without a
bound the control actors grow with the backlog instead of with the work running. Each
driver process therefore keeps at most ``[executors] max_batches_in_flight`` batches on each
executor actor; the next ones wait in the driver — in the order submitted, per actor — until
a quarter of those slots is free again (they then leave together, in one message), and
``rt.stats()`` shows the wait (``batches_waiting``).

A batch's slot is held from before it is sent until its last result is read, whatever ends
it (its results, an error, a cancel, an actor's death). A waiting batch that is cancelled
leaves the queue without having been sent. A slot handed to a waiter that was cancelled at
that moment passes on to the next one, so no slot is ever lost. Waiters may belong to
different event loops (a notebook's, the portal's): each is woken on its own.

    >>> from toolray_actors.driver._admission import Admission
    >>> Admission(2).snapshot()
    (0, 0, 0)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from toolray import AbortSignal

__all__ = ("Admission",)


@dataclass(slots=True, eq=False)
class _Waiter:
    """A batch waiting on one actor: ``handed`` a slot (``True``), sent without (``False``)."""

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[bool]
    """``True``: a slot was handed over; ``False``: it goes without one (aborted)."""
    handed: bool | None = field(default=None)


class Admission:
    """Per executor actor name: this driver's batches in flight, and those waiting (FIFO).

    ``limit`` 0 admits everything at once (no backpressure).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._burst = max(1, limit // 4)
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._waiting: dict[str, deque[_Waiter]] = {}
        self.waited = 0
        """Batches that had to wait for a slot, since this driver connected."""

    def snapshot(self) -> tuple[int, int, int]:
        """``(in flight, waiting, waited so far)`` over every actor."""
        with self._lock:
            running = sum(self._running.values())
            waiting = sum(len(q) for q in self._waiting.values())
            return running, waiting, self.waited

    @asynccontextmanager
    async def slot(self, name: str, signal: AbortSignal | None = None) -> AsyncIterator[None]:
        """Hold one of ``name``'s slots for the body of the ``async with``.

        A batch whose ``signal`` aborts while it waits (its caller's abort, its deadline)
        goes at once without a slot: the executor ends it at once, with its calls' results.
        """
        waiter = self._enter(name)
        holds = waiter is None
        if waiter is not None:
            stop = signal.add_listener(lambda: self._bypass(name, waiter)) if signal else None
            try:
                holds = await waiter.future
            except asyncio.CancelledError:
                with self._lock:
                    handed = waiter.handed
                    if handed is None:
                        self._leave_queue(name, waiter)
                if handed:  # handed over as it was cancelled: the next one takes it
                    self._release(name)
                raise
            finally:
                if stop is not None:
                    stop()
        try:
            yield
        finally:
            if holds:
                self._release(name)

    def _enter(self, name: str) -> _Waiter | None:
        """Take a slot at once (``None``), or queue up behind the batches already waiting."""
        with self._lock:
            running = self._running.get(name, 0)
            queue = self._waiting.get(name)
            if self.limit <= 0 or (running < self.limit and not queue):
                self._running[name] = running + 1
                return None
            loop = asyncio.get_running_loop()
            waiter = _Waiter(loop, loop.create_future())
            self._waiting.setdefault(name, deque()).append(waiter)
            self.waited += 1
            return waiter

    def _bypass(self, name: str, waiter: _Waiter) -> None:
        """An aborted batch still waiting leaves the queue and goes without a slot."""
        with self._lock:
            if waiter.handed is not None:
                return
            self._leave_queue(name, waiter)
            waiter.handed = False
        with contextlib.suppress(RuntimeError):  # (its loop is closed)
            waiter.loop.call_soon_threadsafe(_grant, waiter.future, False)

    def _leave_queue(self, name: str, waiter: _Waiter) -> None:
        self._waiting[name].remove(waiter)
        self._tidy(name)

    def _release(self, name: str) -> None:
        """A batch ended: once a burst of slots is free, the first waiters take them.

        Handing slots over a burst at a time (a quarter of the bound) lets the batches it
        wakes leave in one message per actor instead of one each (see ``Submissions``).
        """
        with self._lock:
            self._running[name] -= 1
            queue = self._waiting.get(name)
            if queue and self._running[name] <= self.limit - self._burst:
                while queue and self._running[name] < self.limit:
                    waiter = queue.popleft()
                    try:
                        waiter.loop.call_soon_threadsafe(_grant, waiter.future, True)
                    except RuntimeError:  # its loop is closed: nobody waits there any more
                        continue
                    waiter.handed = True
                    self._running[name] += 1
            self._tidy(name)

    def _tidy(self, name: str) -> None:
        """Forget an actor with nothing in flight and nothing waiting."""
        if not self._waiting.get(name, True):
            del self._waiting[name]
        if self._running.get(name) == 0:
            del self._running[name]


def _grant(future: asyncio.Future[bool], slot: bool) -> None:
    """Wake a waiter (on its own loop): with a slot, or without one (aborted)."""
    if not future.done():
        future.set_result(slot)
