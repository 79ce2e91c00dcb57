"""Batch deadlines in-process (API §28): ``ToolBatchInput(deadline_s=...)``.

Time is a ``FakeClock`` with autojump, so a 30 s deadline takes no real time: the virtual
clock says when the batch returned. A body that ignores its signal and cannot be
stopped is a sync body blocked on a :class:`Gate` in its thread; the test opens the gate
at its end, so no thread outlives it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator
from typing import Any

import pytest

from toolray import (
    AbortController,
    BatchExecutor,
    LogStep,
    MemoryEventLog,
    RateLimit,
    RetryPolicy,
    TimeoutPolicy,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolExecutionInput,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray.errors import ToolWorkerLostError
from toolray.testing import FakeClock, Gate

pytestmark = pytest.mark.timeout(60)

GRACE_MS = 300.0


def _render(args: Any, value: Any) -> list[Any]:
    return [text_block(str(value))]


def _tool(name: str, execute: Any, *, safe: bool = True, **extra: Any) -> Any:
    return define_tool(
        name=name,
        description=name,
        parameters={"s": {"type": "number"}},
        output=ToolOutput(schema={"type": "string"}, render=_render),
        execute=execute,
        is_concurrency_safe=lambda args: safe,
        **extra,
    )


class Rig:
    """A registry on a fake clock, its executor, and the bodies' starts and gates."""

    def __init__(self) -> None:
        self.clock = FakeClock(autojump=True)
        self.reg = ToolRegistry(clock=self.clock)
        self.executor = BatchExecutor(self.reg, kill_grace_ms=GRACE_MS)
        self.reg.set_executor(self.executor)
        self.started: list[str] = []
        self.stuck = Gate()  # what the uncooperative bodies block on
        self.began = Gate()  # a cooperative body started
        clock = self.clock

        async def sleep(args: Any, ctx: Any) -> str:  # cooperative: stops on its signal
            self.started.append(ctx.call_id)
            self.began.open()
            sleeper = asyncio.ensure_future(clock.sleep(args.get("s", 1.0)))
            aborted = asyncio.ensure_future(ctx.signal.wait())
            await asyncio.wait({sleeper, aborted}, return_when=asyncio.FIRST_COMPLETED)
            sleeper.cancel()
            aborted.cancel()
            return "slept"

        def hang(args: Any, ctx: Any) -> str:  # deaf to its signal, in a thread
            self.started.append(ctx.call_id)
            self.stuck.wait_sync(30)
            return "hung"

        async def deaf(args: Any, ctx: Any) -> str:  # deaf to its signal, on the loop
            self.started.append(ctx.call_id)
            await asyncio.Event().wait()
            return "never"

        self.reg.register(_tool("sleep", sleep))
        self.reg.register(_tool("sleep_x", sleep, safe=False))
        self.reg.register(_tool("hang", hang))
        self.reg.register(_tool("deaf", deaf))

    async def run(self, calls: list[ToolCall], **options: Any) -> ToolBatchResult:
        batch = ToolBatchInput(calls, **options)
        return await asyncio.wait_for(self.reg.execute_batch(batch), 10)


@pytest.fixture
def rig() -> Iterator[Rig]:
    made = Rig()
    try:
        yield made
    finally:
        made.stuck.open()


def codes(result: ToolBatchResult) -> list[str | None]:
    out = []
    for item in result.results:
        error = getattr(item.result, "error", None)
        out.append(error.info.code if error is not None and error.info else None)
    return out


def call(k: int, name: str, seconds: float = 1.0) -> ToolCall:
    return ToolCall(f"c{k}", name, f'{{"s": {seconds}}}')


# ---------------------------------------------------------------------- the value
@pytest.mark.parametrize("bad", [-1, -0.001, math.nan, math.inf, -math.inf])
def test_a_deadline_must_be_a_finite_number_of_seconds_at_least_zero(bad: float) -> None:
    with pytest.raises(ValueError, match="deadline_s must be a finite number"):
        ToolBatchInput([], deadline_s=bad)


@pytest.mark.parametrize("bad", [True, False, "1", [1]])
def test_a_deadline_must_be_a_number(bad: Any) -> None:
    with pytest.raises(TypeError, match="deadline_s must be a number of seconds"):
        ToolBatchInput([], deadline_s=bad)


def test_a_deadline_is_kept_as_seconds() -> None:
    assert ToolBatchInput([], deadline_s=2).deadline_s == 2.0
    assert ToolBatchInput([], deadline_s=0).deadline_s == 0.0
    assert ToolBatchInput([]).deadline_s is None


def test_the_executor_s_grace_is_checked() -> None:
    with pytest.raises(ValueError, match="kill_grace_ms"):
        BatchExecutor(ToolRegistry(), kill_grace_ms=-1)
    with pytest.raises(TypeError, match="kill_grace_ms"):
        BatchExecutor(ToolRegistry(), kill_grace_ms=True)


# ---------------------------------------------------------------------- the batch
async def test_calls_that_finish_in_time_are_untouched(rig: Rig) -> None:
    result = await rig.run([call(1, "sleep", 1), call(2, "sleep", 2)], deadline_s=5)
    assert codes(result) == [None, None]
    assert rig.clock.now() == pytest.approx(2.0)


async def test_running_calls_stop_and_later_ones_never_start(rig: Rig) -> None:
    calls = [call(1, "sleep", 1), call(2, "sleep", 10), call(3, "sleep_x", 1), call(4, "sleep")]
    log = MemoryEventLog()
    result = await rig.run(calls, deadline_s=3, scope="s", log=LogStep(1, 1, log))
    assert codes(result) == [None, "DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED"]
    assert rig.started == ["c1", "c2"]  # the exclusive call and the one after never ran
    assert rig.clock.now() == pytest.approx(3.0)  # the cooperative body stopped at once
    stopped, never = result.results[1].result, result.results[2].result
    assert stopped.error.message == "tool call stopped: the batch's deadline of 3s passed"  # type: ignore[union-attr]
    assert never.error.message == "tool call not started: the batch's deadline of 3s passed"  # type: ignore[union-attr]
    assert never.content == [text_block("Error: " + never.error.message)]  # type: ignore[union-attr]
    assert {r.result.error.fault for r in result.results[1:]} == {"cancelled"}  # type: ignore[union-attr]
    assert result.faults["cancelled"] == 3
    results = [e["result"] for e in log.events if e["type"] == "tool/result"]
    logged = [r["error"]["info"]["code"] if r["isError"] else None for r in results]
    assert logged == codes(result)


async def test_a_deadline_of_zero_runs_nothing(rig: Rig) -> None:
    result = await rig.run([call(1, "sleep"), call(2, "nope")], deadline_s=0)
    assert codes(result) == ["DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED"]
    assert rig.started == []


async def test_a_hung_sync_body_is_abandoned_after_the_grace(rig: Rig) -> None:
    result = await rig.run([call(1, "hang"), call(2, "sleep", 1)], deadline_s=2)
    # the second call finished in time: its success stands though it committed later
    assert codes(result) == ["DEADLINE_EXCEEDED", None]
    assert rig.clock.now() == pytest.approx(2 + GRACE_MS / 1000)
    reason = result.results[0].result.error.info.reason  # type: ignore[union-attr]
    assert reason is not None
    assert "abandoned" in reason
    assert "300ms" in reason
    assert rig.executor.stats().in_flight == 0


async def test_an_async_body_deaf_to_its_signal_is_cancelled_after_the_grace(rig: Rig) -> None:
    result = await rig.run([call(1, "deaf")], deadline_s=1)
    assert codes(result) == ["DEADLINE_EXCEEDED"]
    assert rig.clock.now() == pytest.approx(1 + GRACE_MS / 1000)


async def test_a_user_abort_before_the_deadline_stays_an_abort(rig: Rig) -> None:
    ctrl = AbortController()
    run = asyncio.ensure_future(
        rig.run([call(1, "sleep", 10), call(2, "sleep_x")], signal=ctrl.signal, deadline_s=5)
    )
    await asyncio.wait_for(rig.began.wait(), 5)
    ctrl.abort("user")
    result = await run
    assert codes(result) == ["ABORTED", "ABORTED_BEFORE_DISPATCH"]


async def test_a_tool_timeout_before_the_deadline_stays_a_timeout(rig: Rig) -> None:
    TimeoutPolicy().install(rig.reg)
    rig.reg.register(_tool("short", rig.reg.get("sleep").execute, timeout_ms=500))  # type: ignore[union-attr]
    result = await rig.run([call(1, "short", 10), call(2, "sleep", 10)], deadline_s=2)
    assert codes(result) == ["TOOL_TIMEOUT", "DEADLINE_EXCEEDED"]


async def test_a_call_waiting_for_a_rate_limit_token_never_runs(rig: Rig) -> None:
    limited = _tool("limited", lambda a, c: "ok", rate_limit=RateLimit(0.1))
    rig.reg.register(limited)
    result = await rig.run([call(1, "limited"), call(2, "limited")], deadline_s=3)
    assert codes(result) == [None, "DEADLINE_EXCEEDED"]  # the second token is 10 s away
    assert rig.clock.now() == pytest.approx(3.0)


async def test_no_retry_starts_after_the_deadline(rig: Rig) -> None:
    attempts: list[float] = []

    async def flaky(args: Any, ctx: Any) -> str:
        attempts.append(rig.clock.now())
        raise ToolWorkerLostError("gone")

    retry = RetryPolicy(attempts=5, backoff_ms=1000, multiplier=1.0)
    rig.reg.register(_tool("flaky", flaky, idempotent=True, retry=retry))
    result = await rig.run([call(1, "flaky")], deadline_s=2.5)
    assert len(attempts) == 3  # at 0, 1 and 2 s; the backoff to 3 s met the deadline
    assert codes(result) == ["WORKER_LOST"]  # the last attempt's result stands


async def test_a_stream_of_commits_ends_by_the_deadline_too(rig: Rig) -> None:
    seen: list[int] = []
    batch = ToolBatchInput([call(1, "sleep", 1), call(2, "hang")], deadline_s=2)
    result = await rig.executor.execute(batch, on_commit=lambda k, r: seen.append(k))
    assert seen == [0, 1]
    assert codes(result) == [None, "DEADLINE_EXCEEDED"]


# ---------------------------------------------------------------------- one call
async def test_one_call_with_a_deadline(rig: Rig) -> None:
    signal = AbortController().signal
    done = await rig.reg.execute(ToolExecutionInput("c1", "sleep", {"s": 1}, signal), deadline_s=5)
    assert not done.is_error
    late = await rig.reg.execute(ToolExecutionInput("c2", "hang", {}, signal), deadline_s=1)
    assert late.error.info.code == "DEADLINE_EXCEEDED"  # type: ignore[union-attr]
    assert late.error.fault == "cancelled"  # type: ignore[union-attr]
    rig.stuck.open()  # its thread (on the loop's default executor) ends with the test
    with pytest.raises(ValueError, match="deadline_s"):
        await rig.reg.execute(ToolExecutionInput("c3", "sleep", {}, signal), deadline_s=-1)
