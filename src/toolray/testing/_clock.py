"""``FakeClock``: virtual time for tests; ``autojump`` skips idle waits instantly."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import final

__all__ = ("FakeClock",)


@final
class FakeClock:
    """A :class:`toolray.Clock` whose time moves only when told.

    With ``autojump``, time jumps to the next sleeper whenever every task on the loop waits.

    Example:
        >>> import asyncio
        >>> clock = FakeClock(autojump=True)
        >>> async def main():
        ...     await clock.sleep(30)
        ...     return clock.now()
        >>> asyncio.run(main())
        30.0
    """

    def __init__(self, *, autojump: bool = False, start: float = 0.0) -> None:
        self.autojump = autojump
        self._now = float(start)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._jumper: asyncio.Task[None] | None = None

    def now(self) -> float:
        """Virtual monotonic seconds."""
        return self._now

    async def sleep(self, seconds: float) -> None:
        """Wait until virtual time reaches ``now() + seconds``."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        deadline = self._now + max(0.0, float(seconds))
        heapq.heappush(self._sleepers, (deadline, next(self._seq), fut))
        if self.autojump and (self._jumper is None or self._jumper.done()):
            self._jumper = loop.create_task(self._jump_when_idle())
        self._wake_due()
        await fut

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` and wake every sleeper that is due."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self._now += seconds
        self._wake_due()

    def _wake_due(self) -> None:
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def _prune(self) -> None:
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)

    async def _jump_when_idle(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            idle = 0
            while idle < 5:  # several empty turns of the loop in a row: everyone waits
                await asyncio.sleep(0)
                ready = getattr(loop, "_ready", None)
                idle = idle + 1 if not ready else 0
            self._prune()
            if not self._sleepers:
                return
            self._now = max(self._now, self._sleepers[0][0])
            self._wake_due()
