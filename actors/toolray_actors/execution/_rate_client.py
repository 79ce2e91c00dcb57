"""``RayRateLimiter``: an executor's side of the namespace's token buckets.

The registry mirror inside each executor actor takes its tokens here (it is the mirror's
``rate_limiter``). Per tool, the calls waiting in this executor form one FIFO queue; one
pump asks the tool's :class:`~toolray_actors.control._bucket_actor.BucketActor` for a lease
covering every waiting call, hands the slots out in order, and asks again for the rest
when the bucket's horizon has moved. A call whose next possible slot lies past its
``max_wait_ms`` fails ``RATE_LIMITED``; an aborted call leaves the queue (a slot it was
given is not reused). A bucket actor that died is asked again once Ray restarted it.

``[rate_limits.<tool>]`` of the configuration overrides a definition's limit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolray import AbortSignal, RateLimit
from toolray.farm import rate_limited, wait_until
from toolray.lowlevel import SystemClock
from toolray_actors.control._bucket_actor import HORIZON_S, Lease

__all__ = ("RayRateLimiter",)

_log = logging.getLogger("toolray")
_clock = SystemClock()
_RETRY_S = (0.02, 0.05, 0.1, 0.2, 0.5)


@dataclass(eq=False, slots=True)
class _Waiter:
    limit: RateLimit
    asked: float
    granted: asyncio.Future[float | None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class _ToolQueue:
    """The waiting calls of one tool in this executor, and their pump."""

    def __init__(self, tool: str, bucket: Callable[[], Any]) -> None:
        self.tool = tool
        self._bucket = bucket
        self.waiting: deque[_Waiter] = deque()
        self._pump: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()

    async def acquire(self, limit: RateLimit, signal: AbortSignal) -> float | None:
        waiter = _Waiter(limit, time.monotonic())
        self.waiting.append(waiter)
        self._wake.set()
        if self._pump is None or self._pump.done():
            self._pump = asyncio.ensure_future(self._run())
        watcher = asyncio.ensure_future(signal.wait())
        try:
            await asyncio.wait((waiter.granted, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
        if not waiter.granted.done():  # aborted while queued
            waiter.granted.cancel()
            return None
        slot = waiter.granted.result()  # raises RATE_LIMITED for a refused call
        if slot is None or not await wait_until(_clock, slot, signal):
            return None
        return max(0.0, slot - waiter.asked)

    def _live(self) -> list[_Waiter]:
        while self.waiting and self.waiting[0].granted.done():
            self.waiting.popleft()
        return [w for w in self.waiting if not w.granted.done()]

    async def _run(self) -> None:
        failures = 0
        while True:
            live = self._live()
            if not live:
                return
            self._wake.clear()
            try:
                lease = await self._lease(len(live), live[-1].limit)
            except Exception:  # the bucket actor is restarting: ask again soon
                _log.debug("toolray: bucket %r unavailable", self.tool, exc_info=True)
                await asyncio.sleep(_RETRY_S[min(failures, len(_RETRY_S) - 1)])
                failures += 1
                continue
            failures = 0
            pause = self._hand_out(live, lease, time.monotonic())
            if self._live():
                # more waiters than slots within the horizon: ask again as it moves on
                with_new = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({with_new}, timeout=pause)
                with_new.cancel()

    async def _lease(self, count: int, limit: RateLimit) -> Lease:
        lease: Lease = await self._bucket().lease.remote(count, limit)
        return lease

    def _hand_out(self, live: list[_Waiter], lease: Lease, now: float) -> float:
        """Give slots in queue order; refuse those that cannot wait; the pause until next."""
        slots = iter(lease.delays)
        next_at = now + lease.next_delay
        for waiter in live:
            if waiter.granted.done():  # aborted during the round trip: its slot goes on
                continue
            delay = next(slots, None)
            if delay is not None:
                waiter.granted.set_result(now + delay)
                continue
            limit = waiter.limit
            if limit.max_wait_ms is not None and next_at > waiter.asked + limit.max_wait_ms / 1000:
                waiter.granted.set_exception(rate_limited(self.tool, limit))
        return max(0.01, min(HORIZON_S / 2, lease.next_delay - HORIZON_S / 2))


class RayRateLimiter:
    """The ``RateLimiter`` of an executor actor's registry mirror."""

    def __init__(
        self, bucket: Callable[[str], Any], overrides: Mapping[str, RateLimit] | None = None
    ) -> None:
        self._bucket = bucket
        self._overrides = dict(overrides or {})
        self._queues: dict[str, _ToolQueue] = {}

    def limit_for(self, tool: str, limit: RateLimit) -> RateLimit:
        """The configured limit of ``tool`` if there is one, else the definition's."""
        return self._overrides.get(tool, limit)

    async def acquire(self, tool: str, limit: RateLimit, signal: AbortSignal) -> float | None:
        """See ``toolray.farm.RateLimiter``: a token of the namespace's bucket for ``tool``."""
        if signal.aborted:
            return None
        queue = self._queues.get(tool)
        if queue is None:
            queue = self._queues[tool] = _ToolQueue(tool, lambda: self._bucket(tool))
        return await queue.acquire(self.limit_for(tool, limit), signal)
