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
from toolray.lowlevel import OPEN_ENDED, Stage, joins, next_stage

__all__ = ("Lane",)


class Lane:
    """One agent run's calls: safe ones overlap, any other runs alone, in arrival order.

    The grouping is the scheduler's planner (``toolray.lowlevel``): a call opens a stage
    (:func:`~toolray.lowlevel.next_stage`) unless it joins the open one
    (:func:`~toolray.lowlevel.joins`); a stage's calls wait for the stage before it. Each
    call here is a whole toolray batch, so only the order of turns is kept.

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

    __slots__ = ("_arrived", "_before", "_calls", "_stage")

    def __init__(self) -> None:
        self._arrived = 0  # calls seen, in arrival order
        self._stage: Stage | None = None  # the open stage
        self._calls: list[asyncio.Future[None]] = []  # its calls still holding the lane
        self._before: list[asyncio.Future[None]] = []  # what its calls wait for

    @asynccontextmanager
    async def turn(self, mode: ExecutionMode) -> AsyncIterator[None]:
        """Hold the lane for one call of ``mode`` while the body of the ``async with`` runs."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        k, stage = self._arrived, self._stage
        self._arrived += 1
        if stage is None or k >= stage.stop or not joins(stage, k, mode):
            # a new stage waits for everything still holding the lane before it
            self._before = [f for f in (*self._before, *self._calls) if not f.done()]
            self._calls = []
            self._stage = next_stage(k, OPEN_ENDED, mode)
        before = list(self._before)
        self._calls.append(done)
        try:
            if before:
                await asyncio.wait(before)  # never cancels the calls it waits for
            yield
        finally:
            done.set_result(None)
            if done in self._calls:
                self._calls.remove(done)
