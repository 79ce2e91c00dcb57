"""Time, injected: the core reads time only through a :class:`Clock`."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, final, runtime_checkable

__all__ = ("Clock", "SystemClock", "system_clock")


@runtime_checkable
class Clock(Protocol):
    """Monotonic seconds and an awaitable sleep; tests inject a fake one."""

    def now(self) -> float:
        """Monotonic time in seconds."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Sleep for ``seconds`` of this clock's time."""
        ...


@final
class SystemClock:
    """The real clock: ``time.monotonic`` and ``asyncio.sleep``."""

    __slots__ = ()

    def now(self) -> float:
        """Monotonic time in seconds."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep on the running loop."""
        await asyncio.sleep(seconds)


system_clock = SystemClock()
