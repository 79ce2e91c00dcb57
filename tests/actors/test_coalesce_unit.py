"""Coalesced dispatch without Ray: the ``Outbox`` queue and ``ToolWorker.run_many``.

The outbox is driven with a fake transport (a stream the test feeds); the worker is the
plain class, its control-lane methods called directly. Nothing here waits on time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import cloudpickle
import pytest

from toolray import ToolOutput, define_tool, text_block
from toolray.isolation import CallOutcome
from toolray_actors._wire import AbortOrder, Settled, WorkerRequest
from toolray_actors.execution._coalesce import AbortQueue, Chunk, Outbox, StreamEnded
from toolray_actors.execution._worker import ToolWorker


class FakeWorker:
    """A transport: records each message; the test feeds each message's reply stream."""

    def __init__(self, *, fail_send: bool = False) -> None:
        self.messages: list[list[WorkerRequest]] = []
        self.replies: list[asyncio.Queue[Any]] = []
        self.fail_send = fail_send

    def __call__(self, requests: list[WorkerRequest]) -> AsyncIterator[Chunk]:
        if self.fail_send:
            raise ConnectionError("cannot submit")
        self.messages.append(list(requests))
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.replies.append(queue)
        return self._stream(queue)

    async def _stream(self, queue: asyncio.Queue[Any]) -> AsyncIterator[Chunk]:
        while True:
            item = await queue.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item


async def ticks(n: int = 8) -> None:
    """Let the loop run ``n`` iterations (an outbox flushes within a few)."""
    for _ in range(n):
        await asyncio.sleep(0)


def req(token: str) -> WorkerRequest:
    return WorkerRequest(token, "def:1", None, {}, {})


def ok(value: Any) -> CallOutcome:
    return CallOutcome(status="ok", value=value)


async def test_requests_of_one_tick_travel_in_one_message_and_later_ones_in_the_next() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    first = [box.submit(req(f"t{i}")) for i in range(3)]
    assert worker.messages == []  # nothing leaves before the end of the tick
    await ticks()
    assert [[r.token for r in m] for m in worker.messages] == [["t0", "t1", "t2"]]
    later = box.submit(req("t3"))
    await ticks()
    assert [[r.token for r in m] for m in worker.messages] == [["t0", "t1", "t2"], ["t3"]]
    worker.replies[0].put_nowait([Settled("t0", ok(0)), Settled("t2", ok(2)), Settled("t1", ok(1))])
    worker.replies[1].put_nowait([Settled("t3", ok(3))])
    assert [await f for f in [*first, later]] == [ok(0), ok(1), ok(2), ok(3)]
    assert box.statistics().messages == 2
    assert box.statistics().requests == 4


async def test_a_lone_request_leaves_at_the_end_of_its_tick() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    box.submit(req("t0"))
    await asyncio.sleep(0)
    assert len(worker.messages) == 1
    box.close()


async def test_a_fan_out_spread_over_ticks_still_travels_in_few_messages() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    for tick in range(4):  # a batch's scheduler starts 16 calls per tick
        for i in range(16):
            box.submit(req(f"t{tick}-{i}"))
        await asyncio.sleep(0)
    await ticks()
    assert sum(len(m) for m in worker.messages) == 64
    assert len(worker.messages) <= 2
    box.close()


async def test_each_request_resolves_when_its_own_outcome_arrives() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    fast, slow = box.submit(req("fast")), box.submit(req("slow"))
    await ticks()
    worker.replies[0].put_nowait([Settled("fast", ok("f"))])
    assert await fast == ok("f")
    assert not slow.done()  # a slow mate never holds back the others
    worker.replies[0].put_nowait([Settled("slow", ok("s"))])
    worker.replies[0].put_nowait(None)
    assert await slow == ok("s")


async def test_a_failed_stream_fails_only_the_requests_still_waiting() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    done, held = box.submit(req("done")), box.submit(req("held"))
    await ticks()
    worker.replies[0].put_nowait([Settled("done", ok(1))])
    worker.replies[0].put_nowait(RuntimeError("the worker died"))
    assert await done == ok(1)
    with pytest.raises(RuntimeError, match="the worker died"):
        await held


async def test_a_stream_ending_without_an_outcome_fails_that_request() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    answered, forgotten = box.submit(req("a")), box.submit(req("b"))
    await ticks()
    worker.replies[0].put_nowait([Settled("a", ok(1))])
    worker.replies[0].put_nowait(None)
    assert await answered == ok(1)
    with pytest.raises(StreamEnded):
        await forgotten


async def test_a_message_that_cannot_be_sent_fails_its_requests() -> None:
    box = Outbox(FakeWorker(fail_send=True))
    futures = [box.submit(req("a")), box.submit(req("b"))]
    await ticks()
    for fut in futures:
        with pytest.raises(ConnectionError):
            await fut


async def test_a_full_message_leaves_at_once() -> None:
    worker = FakeWorker()
    box = Outbox(worker, max_batch=2)
    box.submit(req("a"))
    box.submit(req("b"))
    assert len(worker.messages) == 1  # full: sent without waiting for the tick
    box.submit(req("c"))
    await ticks()
    assert [len(m) for m in worker.messages] == [2, 1]
    box.close()


async def test_an_abandoned_request_does_not_disturb_its_mates() -> None:
    worker = FakeWorker()
    box = Outbox(worker)
    gone, kept = box.submit(req("gone")), box.submit(req("kept"))
    gone.cancel()  # its caller went away
    await ticks()
    worker.replies[0].put_nowait([Settled("gone", ok(0)), Settled("kept", ok(1))])
    assert await kept == ok(1)


# ---------------------------------------------------------------------- the worker side
def _blob(execute: Any, *, name: str = "w") -> bytes:
    definition = define_tool(
        name=name,
        description=None,
        parameters={},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))]),
        execute=execute,
        is_concurrency_safe=lambda a: True,
    )
    return bytes(cloudpickle.dumps(definition))


def _ident(call_id: str) -> dict[str, Any]:
    return {"call_id": call_id, "name": "w", "root_call_id": call_id, "scope": None}


async def test_run_many_runs_each_body_in_its_own_task_and_interrupt_stops_only_one() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        if args["hold"]:
            await asyncio.sleep(3600)  # deaf to its signal: only an interrupt stops it
        return args["n"]

    blob = _blob(body)
    worker = ToolWorker(threads=4)
    requests: list[WorkerRequest] = [
        WorkerRequest("t0", "def:1", blob, {"n": 0, "hold": False}, _ident("c0")),
        WorkerRequest(
            "t1", "def:1", None, {"n": 1, "hold": True}, _ident("c1")
        ),  # mates share the blob
        WorkerRequest("t2", "def:1", None, {"n": 2, "hold": False}, _ident("c2")),
    ]
    stream = worker.run_many(requests)
    outcomes: dict[str, Any] = {}
    for settled in await stream.__anext__():
        outcomes[settled.token] = settled.outcome
    assert outcomes == {"t0": ok(0), "t2": ok(2)}  # settled together: one chunk
    assert await worker.interrupt("t1") == "cancelled"
    first, *rest = await stream.__anext__()
    assert (first.token, rest) == ("t1", [])
    outcome = first.outcome
    assert outcome.status == "error"
    assert outcome.error.code == "ABORTED"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()
    assert (await worker.status()).in_flight == 0


async def test_run_many_answers_missing_for_an_unknown_definition_only() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        return "ran"

    worker = ToolWorker(threads=2)
    requests: list[WorkerRequest] = [
        WorkerRequest("t0", "def:9", None, {}, _ident("c0")),
        WorkerRequest("t1", "def:1", _blob(body), {}, _ident("c1")),
    ]
    outcomes = {}
    async for chunk in worker.run_many(requests):
        outcomes.update({s.token: s.outcome for s in chunk})
    assert outcomes == {"t0": CallOutcome(status="missing"), "t1": ok("ran")}


async def test_an_abort_that_arrives_before_its_message_starts_the_call_aborted() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        return "aborted" if ctx.signal.aborted else "ran"

    worker = ToolWorker(threads=2)
    assert await worker.abort("t1", "too late") is False  # not here yet: remembered
    requests: list[WorkerRequest] = [
        WorkerRequest("t0", "def:1", _blob(body), {}, _ident("c0")),
        WorkerRequest("t1", "def:1", None, {}, _ident("c1")),
    ]
    outcomes = {}
    async for chunk in worker.run_many(requests):
        outcomes.update({s.token: s.outcome for s in chunk})
    assert outcomes == {"t0": ok("ran"), "t1": ok("aborted")}


async def test_aborts_of_one_tick_leave_in_one_control_message() -> None:
    sent: list[Any] = []
    queue = AbortQueue(lambda o: sent.append(("one", o)), lambda i: sent.append(("many", i)))
    queue.put(AbortOrder("t1", "stop"))
    queue.put(AbortOrder("t2", "stop"))
    assert sent == []  # nothing leaves before the end of the tick
    await asyncio.sleep(0)
    assert sent == [("many", [AbortOrder("t1", "stop"), AbortOrder("t2", "stop")])]
    queue.put(AbortOrder("t3", None, 0.01, 0.05))
    await asyncio.sleep(0)
    assert sent[-1] == ("one", AbortOrder("t3", None, 0.01, 0.05))  # a lone abort: plain method


async def test_abort_many_fires_each_named_call_and_remembers_the_early_ones() -> None:
    async def body(args: Any, ctx: Any) -> Any:
        await ctx.signal.wait()
        return ctx.signal.reason

    worker = ToolWorker(threads=2)
    stream = worker.run_many(
        [
            WorkerRequest("t0", "def:1", _blob(body), {}, _ident("c0")),
            WorkerRequest("t1", "def:1", None, {}, _ident("c1")),
        ]
    )
    first = asyncio.ensure_future(stream.__anext__())
    await ticks()  # both bodies are waiting on their signals
    orders = [AbortOrder("t0", "r0"), AbortOrder("t1", "r1"), AbortOrder("t9", "later")]
    assert await worker.abort_many(orders) == 2
    outcomes = {s.token: s.outcome for s in await first}
    assert outcomes == {"t0": ok("r0"), "t1": ok("r1")}  # stopped together: one chunk
    await stream.aclose()
