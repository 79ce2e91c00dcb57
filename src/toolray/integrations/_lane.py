"""Calls that a framework starts one by one, kept in toolray's order: the lane.

Pydantic AI and the OpenAI Agents SDK hand an integration one call at a time and may run
the calls of one model turn concurrently. A toolray batch plans such calls into stages — a
run of concurrency-safe calls overlaps, any other call is a barrier that runs alone — and
the lane keeps the same plan for calls that arrive separately, in arrival order:

- a ``"parallel"`` call waits for the last exclusive call before it, then runs beside the
  other parallel calls;
- an ``"exclusive"`` call waits for every call before it, and every later call waits for it.

Arrival order is the order in which the framework starts its calls: model order in both
frameworks, which create one task per call in that order. All bookkeeping happens before the
first ``await``, so the order cannot be lost; a cancelled call still releases its place.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from toolray import ExecutionMode

__all__ = ("Lane",)


class Lane:
    """One agent run's calls: safe ones overlap, any other runs alone, in arrival order.

    Example:
        >>> import asyncio
        >>> async def main():
        ...     lane, order = Lane(), []
        ...     async def call(name, mode):
        ...         async with lane.turn(mode):
        ...             order.append(f"start {name}")
        ...             await asyncio.sleep(0)
        ...             order.append(f"end {name}")
        ...     await asyncio.gather(call("a", "parallel"), call("b", "exclusive"))
        ...     return order
        >>> asyncio.run(main())
        ['start a', 'end a', 'start b', 'end b']
    """

    __slots__ = ("_barrier", "_group")

    def __init__(self) -> None:
        self._group: list[asyncio.Future[None]] = []  # parallel calls since the last barrier
        self._barrier: asyncio.Future[None] | None = None  # the last exclusive call

    @asynccontextmanager
    async def turn(self, mode: ExecutionMode) -> AsyncIterator[None]:
        """Hold the lane for one call of ``mode`` while the body of the ``async with`` runs."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        before = [] if self._barrier is None else [self._barrier]
        if mode == "parallel":
            self._group.append(done)
        else:
            before += self._group
            self._group = []
            self._barrier = done
        try:
            if before:
                await asyncio.wait(before)  # never cancels the calls it waits for
            yield
        finally:
            self._release(done)

    def _release(self, done: asyncio.Future[None]) -> None:
        done.set_result(None)
        if done in self._group:
            self._group.remove(done)
        if self._barrier is done:
            self._barrier = None
