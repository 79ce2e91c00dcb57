"""How an executor actor streams batches back: one batch's items, and several batches merged.

A batch's run commits results and log records into a :class:`Feed`; :func:`streamed` turns
them into ``StreamChunk`` items as they commit (a paced batch at most one chunk per
``PACE_S``; the first leaves at once) and ends with the ``StreamEnd`` record, which carries
what committed last (a small batch is one item). :func:`merged` runs several batches' streams
at once and sends what they produced together as one ``MuxChunk`` per message: the batches
one driver submits to this actor within one tick cost one remote call and a few stream
items, not two calls and at least one item each.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from toolray import ToolCallResult
from toolray_actors import _wire as wire
from toolray_actors._executor_wire import BatchSpec

__all__ = ("PACE_S", "Feed", "merged", "streamed")

PACE_S = 0.01
"""A paced batch's chunks leave at most this often (``BatchSpec.paced``)."""


class Feed:
    """A batch's stream: its log records (as its sink) and results, as they commit."""

    def __init__(self, queue: asyncio.Queue[wire.StreamEntry], calls: int) -> None:
        self.queue = queue
        self.left = calls

    def append(self, event: dict[str, Any]) -> None:
        self.queue.put_nowait(wire.LogRecord(event))

    def __call__(self, index: int, result: ToolCallResult) -> None:
        self.queue.put_nowait(wire.Committed(index, result))
        self.left -= 1


async def streamed(
    task: asyncio.Future[Any], feed: Feed, trace: list[dict[str, Any]], paced: bool
) -> AsyncIterator[wire.StreamItem]:
    """``task``'s batch as it commits into ``feed``, then its end record."""
    queue = feed.queue
    last: list[wire.StreamEntry] = []
    sent = -PACE_S
    while not (task.done() and queue.empty()):
        if queue.empty():
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                continue
            chunk = [getter.result()]
        else:
            chunk = []
        if feed.left <= 0 and not task.done():
            # every result committed: the run ends at once, and what is left (its last
            # records) leaves with the end record in one item, not two
            await asyncio.wait({task})
        elif paced and not task.done():  # the first chunk leaves at once
            pause = sent + PACE_S - time.monotonic()
            if pause > 0:
                await asyncio.wait({task}, timeout=pause)
        while not queue.empty():
            chunk.append(queue.get_nowait())
        if task.done() and task.exception() is None:
            last = chunk  # everything committed: it leaves with the end record
            break
        yield wire.StreamChunk(chunk)
        sent = time.monotonic()
    result = task.result()
    yield wire.StreamEnd(tuple(result.additional_contexts), result.concluded, trace, last)


_Arrival = tuple[str, wire.StreamItem | wire.BatchFailed | None]
"""A batch id and its next item (``None``: that batch's stream is over). In-process only."""


async def merged(
    run: Callable[[BatchSpec], AsyncIterator[wire.StreamItem]], specs: Sequence[BatchSpec]
) -> AsyncGenerator[wire.MuxChunk, None]:
    """Run every spec's stream at once; what they produce together leaves as one chunk.

    A batch whose run raises ends with ``BatchFailed`` (its error, for its driver alone).
    Chunks of paced batches leave at most one per ``PACE_S`` unless they carry an end.
    Closing this stream closes every batch's (each aborts what it still runs).
    """
    queue: asyncio.Queue[_Arrival] = asyncio.Queue()

    async def pump(spec: BatchSpec) -> None:
        ended = False
        try:
            async for item in run(spec):
                queue.put_nowait((spec.batch_id, item))
                ended = isinstance(item, wire.StreamEnd)
        except Exception as err:
            queue.put_nowait((spec.batch_id, wire.BatchFailed(wire.portable_error(err))))
            ended = True
        finally:
            current = asyncio.current_task()
            if not ended and not (current is not None and current.cancelling()):
                # the run stopped without its end (e.g. a custom executor let a
                # CancelledError out): its driver learns it now, not as a lost executor
                why = RuntimeError("the batch's run ended without its end record")
                queue.put_nowait((spec.batch_id, wire.BatchFailed(why)))
            queue.put_nowait((spec.batch_id, None))

    pace = PACE_S if all(spec.paced for spec in specs) else 0.0
    pumps = [asyncio.ensure_future(pump(spec)) for spec in specs]
    running = len(pumps)
    sent = -pace
    try:
        while running:
            arrivals = [await queue.get()]
            await asyncio.sleep(0)  # what the other batches commit in this tick goes along
            items: dict[str, list[wire.StreamItem | wire.BatchFailed]] = {}
            ends = False
            while True:
                while not queue.empty():
                    arrivals.append(queue.get_nowait())
                for batch_id, item in arrivals:
                    if item is None:
                        running -= 1
                        continue
                    items.setdefault(batch_id, []).append(item)
                    ends = ends or not isinstance(item, wire.StreamChunk)
                arrivals = []
                pause = sent + pace - time.monotonic()
                if ends or pause <= 0 or not running:
                    break
                # paced: gather until the pace is up, unless an end arrives first
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter}, timeout=pause)
                if getter.done():
                    arrivals.append(getter.result())
                else:
                    getter.cancel()
            if items:
                yield wire.MuxChunk(items)
                sent = time.monotonic()
    finally:
        for task in pumps:
            task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.gather(*pumps, return_exceptions=True)
