"""Elastic pools: when a pool adds a worker, when it retires one, and how, losing no call.

A pool whose ``max_size`` exceeds its ``min_size`` is elastic. Executors tell its manager
how many of their calls wait for a worker (every member already runs ``max_concurrency``
of their calls); the manager then adds workers — warm spares first — up to ``max_size``.
Workers that are still starting count as coming capacity, so a burst asks for them once;
a worker Ray cannot place yet stays pending (a cluster autoscaler sees the demand) and the
calls keep waiting in their executors, each abortable.

Every ``idle_s / 4`` the manager asks its members how long they have been idle and
retires those idle for ``idle_s``, never below ``min_size``. Retiring loses no call: the
worker leaves the membership first, is told to *drain* (a call that still reaches it is
answered "retired" and its executor sends it elsewhere, unstarted), and is killed once it
runs nothing. A call that meets the retired worker already gone is sent elsewhere too: the
pool remembers whom it retired, so its executor can tell a retirement from a crash.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from toolray_actors._handles import kill
from toolray_actors._remote import Handle, send

from ._worker import ToolWorker

__all__ = ("ElasticPolicy", "PoolHost", "Resizer")

_log = logging.getLogger("toolray")
_STATUS_TIMEOUT_S = 2.0
_DRAIN_GRACE_S = 1.0
"""How long a drained worker stays up after it ran its last call (late arrivals bounce)."""
_REMEMBERED = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class ElasticPolicy:
    """The sizing rule of one elastic pool (pure)."""

    min_size: int
    max_size: int
    idle_s: float
    per_worker: int

    def grow_by(self, members: int, starting: int, waiting: int) -> int:
        """Workers to add for ``waiting`` calls, counting the ones already starting."""
        wanted = math.ceil(max(0, waiting) / max(1, self.per_worker)) - starting
        return max(0, min(self.max_size - members - starting, wanted))

    def to_retire(self, idle: dict[str, float], members: int) -> list[str]:
        """The workers idle for ``idle_s`` that may go (longest idle first)."""
        room = members - self.min_size
        long_idle = [wid for wid, seconds in idle.items() if seconds >= self.idle_s]
        long_idle.sort(key=lambda wid: -idle[wid])
        return long_idle[: max(0, room)]


class PoolHost(Protocol):
    """What the resizer uses of its pool manager."""

    workers: dict[str, Handle]
    spares: list[tuple[str, Handle]]
    started: set[str]

    def _new_worker(self) -> tuple[str, Handle]: ...
    def _bump(self) -> None: ...
    def _watch(self) -> None: ...
    def _forget(self, wid: str) -> None: ...
    def _refill_spares(self) -> None: ...


class Resizer:
    """Grows and shrinks one pool manager's membership by an :class:`ElasticPolicy`."""

    def __init__(self, host: PoolHost, policy: ElasticPolicy) -> None:
        self.host = host
        self.policy = policy
        self.grown = self.retired_count = 0
        self._retired: OrderedDict[str, None] = OrderedDict()
        self._loop: asyncio.Task[None] | None = None
        self._draining: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start the idle check (once, on the manager's loop)."""
        if self._loop is None or self._loop.done():
            self._loop = asyncio.ensure_future(self._watch_idle())

    def size(self) -> int:
        """Members and workers starting (what the pool holds or will hold)."""
        return len(self.host.workers)

    def grow(self, waiting: int) -> int:
        """Add workers for ``waiting`` calls (spares first); returns how many were added."""
        host = self.host
        starting = sum(1 for wid in host.workers if wid not in host.started)
        started = len(host.workers) - starting
        count = self.policy.grow_by(started, starting, waiting)
        for _ in range(count):
            wid, handle = host.spares.pop(0) if host.spares else host._new_worker()
            host.workers[wid] = handle
        if count:
            self.grown += count
            host._bump()
            host._refill_spares()
            host._watch()
        return count

    def was_retired(self, wid: str) -> bool:
        """Whether this pool retired ``wid`` (a call that met it dead never ran there)."""
        return wid in self._retired

    async def _watch_idle(self) -> None:
        period = max(0.05, self.policy.idle_s / 4)
        while True:
            await asyncio.sleep(period)
            try:
                await self.shrink_once()
            except Exception:  # a worker that died meanwhile: the next round sees the rest
                _log.debug("toolray: an idle check failed", exc_info=True)

    async def shrink_once(self) -> list[str]:
        """Retire the workers idle for ``idle_s`` (never below ``min_size``)."""
        host = self.host
        members = [(w, h) for w, h in host.workers.items() if w in host.started]
        if len(members) <= self.policy.min_size:
            return []
        answers = await asyncio.gather(
            *(_idle_of(handle) for _, handle in members), return_exceptions=True
        )
        idle = {
            wid: float(seconds)
            for (wid, _), seconds in zip(members, answers, strict=True)
            if isinstance(seconds, int | float)
        }
        going = self.policy.to_retire(idle, len(host.workers))
        for wid in going:
            handle = host.workers.pop(wid)
            host._forget(wid)
            self._remember(wid)
            task = asyncio.ensure_future(_drain_and_kill(handle))
            self._draining.add(task)
            task.add_done_callback(self._draining.discard)
        if going:
            self.retired_count += len(going)
            host._bump()
        return going

    def _remember(self, wid: str) -> None:
        self._retired[wid] = None
        while len(self._retired) > _REMEMBERED:
            self._retired.popitem(last=False)


async def _idle_of(handle: Handle) -> float:
    status = await asyncio.wait_for(
        asyncio.wrap_future(send(handle, ToolWorker.status).future()), _STATUS_TIMEOUT_S
    )
    return float(status.idle_s)


async def _drain_and_kill(handle: Handle) -> None:
    """Stop the worker taking calls, wait until it runs none, then end it."""
    try:
        while True:
            running = await asyncio.wrap_future(send(handle, ToolWorker.drain).future())
            if not running:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(_DRAIN_GRACE_S)
    except Exception:
        _log.debug("toolray: a retiring worker went early", exc_info=True)
    kill(handle)
