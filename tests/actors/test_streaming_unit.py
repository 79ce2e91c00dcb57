"""Several batches' streams as one, without Ray: the executor's ``merged`` and the driver's
``Submissions`` (with ``send``/``stream`` replaced by stand-ins).

Each fake batch run is an async generator driven by events the test sets, so what "arrives
in one tick" is decided by the test, never by elapsed time.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import AsyncIterator, Generator
from typing import Any

import pytest

from toolray import ToolCall
from toolray_actors import _wire as wire
from toolray_actors._executor_wire import BatchSpec
from toolray_actors.driver import _submissions as submissions_module
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


async def test_a_run_that_stops_without_its_end_fails_its_batch_at_once() -> None:
    go = asyncio.Event()

    async def run(spec: BatchSpec) -> AsyncIterator[wire.StreamItem]:
        if spec.batch_id == "escaped":
            raise asyncio.CancelledError  # e.g. a custom executor letting it out
        await go.wait()
        yield _end(spec.batch_id)

    stream = merged(run, [_spec("fine"), _spec("escaped")])
    first = await anext(stream)
    (failed,) = first.items["escaped"]  # now, not when its mates end
    assert isinstance(failed, wire.BatchFailed)
    assert "without its end record" in str(failed.error)
    go.set()
    assert [c.items for c in [c async for c in stream]] == [{"fine": [_end("fine")]}]


# ---------------------------------------------------------------- the driver's side
class _Ref:
    """A stand-in for an ObjectRef: awaiting it gives its value."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __await__(self) -> Generator[object, None, object]:
        if False:  # pragma: no cover - makes this a generator
            yield
        return self.value


tickets: list[tuple[object, ...]] = []


def _fake_ray(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``send``/``stream`` of ``_submissions`` without Ray (what they carry is encoded)."""
    sent: list[str] = []
    tickets.clear()

    def send(actor: object, method: Any, *args: object) -> _Ref:
        sent.append(method.__name__)
        return _Ref(True)

    def stream(actor: object, method: Any, data: bytes, *ticket: object) -> AsyncIterator[_Ref]:
        arg = wire.decode(data)
        specs = arg if isinstance(arg, tuple) else (arg,)
        sent.append(method.__name__)
        tickets.append(ticket)

        async def items() -> AsyncIterator[_Ref]:
            if isinstance(arg, tuple):
                mux = wire.MuxChunk({s.batch_id: [_end(s.batch_id)] for s in specs})
                yield _Ref(wire.encode(mux))
            else:
                yield _Ref(wire.encode(_end(specs[0].batch_id)))

        return items()

    monkeypatch.setattr(submissions_module, "send", send)
    monkeypatch.setattr(submissions_module, "stream", stream)
    return sent


def _submitting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], Any, Any]:
    """``(what was sent, a Submissions, an actor)`` on the fake Ray."""
    return _fake_ray(monkeypatch), submissions_module.Submissions(), object()


async def _each_ends(pairs: Any) -> None:
    """Each inbox holds exactly its batch's end record."""
    for batch_id, inbox in pairs:
        assert isinstance(inbox, submissions_module.Inbox)
        assert [item async for item in inbox.items()] == [_end(batch_id)]


async def test_a_tick_of_batches_goes_as_one_group_and_each_gets_its_own_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent, subs, actor = _submitting(monkeypatch)
    inboxes = await asyncio.gather(*(subs.submit("shard", actor, _spec(b)) for b in "abc"))
    assert sent == ["reserve", "run_batches_wire"]
    assert subs.messages == 1
    await _each_ends(zip("abc", inboxes, strict=True))


async def test_a_batch_that_cannot_be_sent_fails_alone_and_its_mates_go_one_by_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent, subs, actor = _submitting(monkeypatch)
    bad = dataclasses.replace(_spec("bad"), calls=(ToolCall("c", "t", {"lock": threading.Lock()}),))
    specs = (_spec("a"), bad, _spec("c"))
    outs = await asyncio.gather(
        *(subs.submit("shard", actor, spec) for spec in specs), return_exceptions=True
    )
    assert isinstance(outs[1], TypeError)  # a lock cannot be pickled
    assert sent.count("run_batch_wire") == 2  # a and c, each alone
    assert sent.count("reserve") == 2  # nothing reserved for the batch that could not go
    await _each_ends((("a", outs[0]), ("c", outs[2])))


async def test_with_a_ledger_a_group_goes_unreserved_each_batch_with_its_own_ticket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from toolray_actors._ledger import DRIVER
    from toolray_actors.driver._unstarted import LedgerRef

    sent, subs, actor = _submitting(monkeypatch)
    ledger = LedgerRef("/nonexistent/ledger", "node")
    inboxes = await asyncio.gather(*(subs.submit("shard", actor, _spec(b), ledger) for b in "abc"))
    assert sent == ["run_batches_wire"]  # no reservation
    ((driver, numbers),) = tickets
    assert driver == DRIVER
    assert [inbox.ticket.number for inbox in inboxes] == list(numbers)
    assert list(numbers) == sorted(set(numbers))  # rising, one per batch
    assert all(inbox.ticket.ledger == ledger for inbox in inboxes)
    await _each_ends(zip("abc", inboxes, strict=True))
    lone = await subs.submit("shard", actor, _spec("d"), ledger)
    assert sent == ["run_batches_wire", "run_batch_wire"]
    assert lone.ticket is not None
    assert lone.ticket.number > max(numbers)
