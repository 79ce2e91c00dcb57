"""Rate limiters: where a call waits for its token before its body is dispatched.

A :class:`RateLimiter` is the seam: in-process each registry has a
:class:`LocalRateLimiter` (one :class:`~toolray.farm._bucket.TokenSchedule` per tool); the
Ray layer plugs in one that leases slots from a bucket actor shared by the whole namespace.
A waiting call is abortable: :func:`wait_until` returns ``False`` when the signal fires
first, and the call then fails ``ABORTED_BEFORE_DISPATCH`` (its body never starts).
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Protocol, final

from toolray._clock import Clock
from toolray._signals import AbortSignal, format_ms
from toolray.errors import RateLimitedError

from ._bucket import TokenSchedule
from ._values import RateLimit

__all__ = ("LocalRateLimiter", "RateLimiter", "rate_limited", "wait_until")


class RateLimiter(Protocol):
    """Hands out the tokens of rate-limited tools."""

    async def acquire(self, tool: str, limit: RateLimit, signal: AbortSignal) -> float | None:
        """Wait for one token of ``tool`` under ``limit``.

        Returns the seconds waited, or ``None`` when ``signal`` fired first (no token is
        kept). Raises :class:`~toolray.errors.RateLimitedError` when no token comes within
        ``limit.max_wait_ms``. A runtime may enforce a configured limit instead of ``limit``.
        """
        ...


def rate_limited(tool: str, limit: RateLimit) -> RateLimitedError:
    """The failure of a call that would wait past its ``max_wait_ms``."""
    wait = format_ms(limit.max_wait_ms or 0)
    return RateLimitedError(
        f'tool "{tool}" is rate-limited ({limit.per_second:g}/s, burst {limit.burst}): '
        f"no token within {wait}ms"
    )


def latest_slot(now: float, limit: RateLimit) -> float:
    """The latest slot a call asking at ``now`` accepts."""
    return math.inf if limit.max_wait_ms is None else now + limit.max_wait_ms / 1000.0


async def wait_until(clock: Clock, when: float, signal: AbortSignal) -> bool:
    """Sleep on ``clock`` until ``when``; ``False`` if ``signal`` fired first."""
    if signal.aborted:
        return False
    delay = when - clock.now()
    if delay <= 0:
        return True
    sleeper = asyncio.ensure_future(clock.sleep(delay))
    watcher = asyncio.ensure_future(signal.wait())
    try:
        await asyncio.wait((sleeper, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        watcher.cancel()
    return not signal.aborted


@final
class LocalRateLimiter:
    """One registry's buckets (one per tool), on the registry's clock.

    Example:
        >>> import asyncio
        >>> from toolray import AbortController, RateLimit
        >>> from toolray.testing import FakeClock
        >>> limiter = LocalRateLimiter(FakeClock(autojump=True))
        >>> signal = AbortController().signal
        >>> limit = RateLimit(2, burst=1)
        >>> async def two():
        ...     return [await limiter.acquire("search", limit, signal) for _ in range(2)]
        >>> asyncio.run(two())
        [0.0, 0.5]
    """

    __slots__ = ("_buckets", "_clock", "_lock")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._buckets: dict[str, TokenSchedule] = {}
        self._lock = threading.Lock()  # a registry may serve several loops at once

    def _reserve(self, tool: str, limit: RateLimit, now: float) -> float | None:
        with self._lock:
            bucket = self._buckets.get(tool)
            if bucket is None:
                bucket = self._buckets[tool] = TokenSchedule(limit, now)
            else:
                bucket.retune(limit)
            slots = bucket.reserve(now, 1, latest_slot(now, limit)).slots
            return slots[0] if slots else None

    def _refund(self, tool: str, slot: float) -> None:
        with self._lock:
            bucket = self._buckets.get(tool)
            if bucket is not None:
                bucket.refund(slot)

    async def acquire(self, tool: str, limit: RateLimit, signal: AbortSignal) -> float | None:
        """See :meth:`RateLimiter.acquire`."""
        if signal.aborted:
            return None
        now = self._clock.now()
        slot = self._reserve(tool, limit, now)
        if slot is None:
            raise rate_limited(tool, limit)
        if not await wait_until(self._clock, slot, signal):
            self._refund(tool, slot)
            return None
        return max(0.0, slot - now)
