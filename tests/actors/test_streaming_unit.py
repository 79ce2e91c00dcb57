"""``execution._streaming.merged``: several batches' streams as one, without Ray.

Each fake batch run is an async generator driven by events the test sets, so what "arrives
in one tick" is decided by the test, never by elapsed time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from toolray_actors import _wire as wire
from toolray_actors._executor_wire import BatchSpec
from toolray_actors.execution._streaming import merged


def _spec(batch_id: str, *, paced: bool = False) -> BatchSpec:
    return BatchSpec(
        batch_id=batch_id,
        calls=(),
        scope=None,
        max_parallel_tool_calls=None,
        log=None,
        aborted=False,
        reason=None,
        tool_set=None,
        paced=paced,
    )


def _end(tag: str) -> wire.StreamEnd:
    return wire.StreamEnd((), False, [{"tag": tag}], [])


async def test_items_that_arrive_in_one_tick_leave_in_one_chunk_by_batch() -> None:
    async def run(spec: BatchSpec) -> AsyncIterator[wire.StreamItem]:
        yield wire.StreamChunk([])
        yield _end(spec.batch_id)

    chunks = [c async for c in merged(run, [_spec("a"), _spec("b"), _spec("c")])]
    assert len(chunks) == 1
    (only,) = chunks
    assert list(only.items) == ["a", "b", "c"]
    for batch_id, items in only.items.items():
        assert [type(i) for i in items] == [wire.StreamChunk, wire.StreamEnd]
        assert items[-1] == _end(batch_id)


async def test_a_batch_whose_run_raises_fails_alone_and_the_others_finish() -> None:
    go = asyncio.Event()

    async def run(spec: BatchSpec) -> AsyncIterator[wire.StreamItem]:
        if spec.batch_id == "bad":
            raise KeyError("no such scope")
        await go.wait()
        yield _end(spec.batch_id)

    stream = merged(run, [_spec("ok"), _spec("bad")])
    first = await anext(stream)
    assert list(first.items) == ["bad"]
    (failed,) = first.items["bad"]
    assert isinstance(failed, wire.BatchFailed)
    assert isinstance(failed.error, KeyError)
    go.set()
    rest = [c async for c in stream]
    assert [c.items for c in rest] == [{"ok": [_end("ok")]}]


async def test_each_batch_keeps_its_order_across_chunks() -> None:
    steps = [asyncio.Event() for _ in range(3)]

    async def run(spec: BatchSpec) -> AsyncIterator[wire.StreamItem]:
        for n, step in enumerate(steps):
            await step.wait()
            yield wire.StreamChunk([wire.LogRecord({"batch": spec.batch_id, "n": n})])
        yield _end(spec.batch_id)

    stream = merged(run, [_spec("x"), _spec("y")])
    chunks: list[wire.MuxChunk] = []
    for step in steps:
        step.set()
        chunks.append(await anext(stream))  # one chunk per step: both batches' records
    chunks += [c async for c in stream]
    seen: dict[str, list[object]] = {"x": [], "y": []}
    for chunk in chunks:
        for batch_id, items in chunk.items.items():
            for item in items:
                match item:
                    case wire.StreamChunk([wire.LogRecord(event)]):
                        seen[batch_id].append(event["n"])
                    case wire.StreamEnd():
                        seen[batch_id].append("end")
    assert seen == {"x": [0, 1, 2, "end"], "y": [0, 1, 2, "end"]}
    assert all(len(c.items) == 2 for c in chunks)  # the two batches always travel together


async def test_closing_the_merged_stream_closes_every_batch_run() -> None:
    closed: list[str] = []
    started = asyncio.Event()
    never = asyncio.Event()

    async def run(spec: BatchSpec) -> AsyncIterator[wire.StreamItem]:
        try:
            yield wire.StreamChunk([])
            started.set()
            await never.wait()
            yield _end(spec.batch_id)
        finally:
            closed.append(spec.batch_id)

    stream = merged(run, [_spec("p", paced=True), _spec("q", paced=True)])
    await anext(stream)
    await started.wait()
    await stream.aclose()
    assert sorted(closed) == ["p", "q"]
