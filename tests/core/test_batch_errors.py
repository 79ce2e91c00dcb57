"""B-ERR: scheduler failures; caps: misuse and overrides (the seed's ToolExecutor).

The seed wins over B-ERR-1's "there is no batch error type": an internal failure rejects with
``ToolBatchExecutionError`` after draining, keeping the committed outcomes and contexts. The
registry contains every tool, listener and policy failure as a result, so the only seam that
can break the scheduler from outside is the durable sink; the tests inject the failure there.

- B-ERR-2's "a call whose prepare was running is not dispatched" needs a rejection *inside*
  ``prepare``, which nothing public can cause (the pipeline turns every listener failure into
  a result). Kept: a call whose start failed is never dispatched, and nothing starts after.
- B-ERR-3 ("the turn ends aborted, not error") is the agent loop's reading of the signal;
  kept: the executor still rejects with ``ToolBatchExecutionError`` and the step signal stays
  aborted for the caller to see.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray import (
    AbortController,
    BatchExecutor,
    LogStep,
    MemoryEventLog,
    ToolBatchExecutionError,
    ToolBatchInput,
    ToolCall,
    ToolRegistry,
)

from ._batch_helpers import LogFailure, Rig, codes, ctx_msg, texts


async def test_b_err_1_tool_listener_and_policy_failures_are_results_not_rejections() -> None:
    async with Rig(fail={"1"}) as rig:

        def pre(execution: Any, nxt: Any) -> Any:
            if execution.call_id == "c2":
                raise RuntimeError("pre exploded")
            return nxt()

        def post(execution: Any, result: Any, nxt: Any) -> Any:
            if execution.call_id == "c3":
                raise RuntimeError("post exploded")
            return nxt()

        def around(execution: Any, nxt: Any) -> Any:
            if execution.call_id == "c4":
                raise RuntimeError("wrapper exploded")
            return nxt()

        def guard(execution: Any) -> str | None:
            if execution.call_id == "c5":
                raise RuntimeError("guard exploded")
            return None

        def observer(execution: Any, result: Any) -> None:
            raise RuntimeError("observer exploded")

        rig.reg.on_pre_execute(pre)
        rig.reg.on_post_execute(post)
        rig.reg.on_execute(around)
        rig.reg.guard(guard)
        rig.reg.on_result(observer)
        result = await rig.run("1", "2", "3", "4", "5", "6")
    assert codes(result) == [(f"c{i}", "error") for i in range(1, 6)] + [("c6", "ok")]
    messages = [r.result.content[0]["text"] for r in result.results[:5]]
    assert messages == [
        "Error: rec failed for 1",
        "Error: pre exploded",
        "Error: post exploded",
        "Error: wrapper exploded",
        "Error: guard exploded",
    ]


async def test_b_err_2_failure_stops_dispatch_drains_then_rejects_with_committed_outcomes() -> None:
    before = {k: (lambda c, k=k: c.defer_context(ctx_msg(f"ctx-c{k}"))) for k in "1234"}
    async with Rig(gated=["2"], before=before) as rig:
        rig.log.fail_on = "tool/call:c3"
        task = rig.start("1", "2", "3", "4", cap=2)
        await rig.trace.reached("sink-failed")
        assert not task.done()  # c2 is still running: never settle while work is in flight
        rig.open("2")
        with pytest.raises(ToolBatchExecutionError) as caught:
            await task
    err = caught.value
    assert isinstance(err.__cause__, LogFailure)
    assert [r.call_id for r in err.results] == ["c1"]
    assert not err.results[0].result.is_error
    assert texts(err.additional_contexts) == ["ctx-c1"]
    assert rig.trace.before("end:2", "returned")
    assert rig.rec.starts == ["1", "2"]
    assert "pre:c3" not in rig.trace.items
    assert rig.log.labels() == ["tool/call:c1", "tool/call:c2", "tool/result:c1"]  # no synthetic


async def test_b_err_2_a_commit_failure_keeps_the_first_failure_and_drains() -> None:
    async with Rig(gated=["2", "3"]) as rig:
        rig.log.fail_on = "tool/result:c1"
        task = rig.start("1", "2", "3", "4", cap=3)
        await rig.trace.reached("sink-failed")
        rig.log.fail_on = "tool/result:c2"  # a later sink failure must not replace the first
        rig.open("2", "3")
        with pytest.raises(ToolBatchExecutionError) as caught:
            await task
    assert "tool/result:c1" in str(caught.value.__cause__)
    assert rig.trace.before("end:2", "returned")
    assert rig.trace.before("end:3", "returned")
    assert "4" not in rig.rec.starts
    assert [e["type"] for e in rig.log.events] == ["tool/call"] * 3


async def test_b_err_3_failure_with_an_aborted_step_still_rejects_after_draining() -> None:
    async with Rig(gated=["1", "2"]) as rig:
        rig.log.fail_on = "tool/result:c1"
        task = rig.start("1", "2", "3")
        await rig.started("1", "2")
        rig.ctl.abort()
        rig.open("1")
        await rig.trace.reached("sink-failed")
        assert not task.done()
        rig.open("2")
        with pytest.raises(ToolBatchExecutionError):
            await task
    assert rig.ctl.signal.aborted
    assert rig.trace.before("end:2", "returned")


# ---------------------------------------------------------------- caps (B-SCHED-7)


@pytest.mark.parametrize(
    "cap",
    [
        pytest.param(0, id="B-SCHED-7-zero"),
        pytest.param(-1, id="B-SCHED-7-negative"),
        pytest.param(1.5, id="B-SCHED-7-fraction"),
        pytest.param(2.0, id="B-SCHED-7-float"),
        pytest.param(True, id="B-SCHED-7-bool"),
        pytest.param("2", id="B-SCHED-7-str"),
    ],
)
def test_b_sched_7_batch_input_cap_must_be_a_positive_integer(cap: Any) -> None:
    with pytest.raises(ValueError, match="max_parallel_tool_calls must be a positive integer"):
        ToolBatchInput([], AbortController().signal, max_parallel_tool_calls=cap)


@pytest.mark.parametrize(
    "cap",
    [
        pytest.param(0, id="B-SCHED-7-zero"),
        pytest.param(1.5, id="B-SCHED-7-fraction"),
        pytest.param(True, id="B-SCHED-7-bool"),
        pytest.param(None, id="B-SCHED-7-none"),
    ],
)
def test_b_sched_7_executor_cap_must_be_a_positive_integer(cap: Any) -> None:
    with pytest.raises(ValueError, match="max_parallel_tool_calls must be a positive integer"):
        BatchExecutor(ToolRegistry(), max_parallel_tool_calls=cap)


def test_api_11_a_log_step_requires_a_scope() -> None:
    with pytest.raises(ValueError):
        ToolBatchInput(
            [ToolCall("c1", "rec", "{}")],
            AbortController().signal,
            log=LogStep(1, 1, MemoryEventLog()),
        )


async def test_seed_batch_with_log_but_no_calls_settles_empty() -> None:
    sink = MemoryEventLog()
    batch = ToolBatchInput([], AbortController().signal, scope="a", log=LogStep(1, 1, sink))
    result = await asyncio.wait_for(ToolRegistry().execute_batch(batch), 5)
    assert result.results == ()
    assert result.concluded is False
    assert sink.events == []


@pytest.mark.parametrize(
    ("executor_cap", "batch_cap", "expected"),
    [pytest.param(1, 3, 3, id="seed-raise"), pytest.param(3, 1, 1, id="seed-lower")],
)
async def test_seed_explicit_max_parallel_tool_calls_overrides_the_executor(
    executor_cap: int, batch_cap: int, expected: int
) -> None:
    async with Rig(gated=["1", "2", "3"]) as rig:
        executor = BatchExecutor(rig.reg, max_parallel_tool_calls=executor_cap)
        task = asyncio.ensure_future(executor.execute(rig.batch("1", "2", "3", cap=batch_cap)))
        await rig.started(*["1", "2", "3"][:expected])
        rig.open("1", "2", "3")
        await task
    assert rig.rec.max_running == expected


@pytest.mark.parametrize(
    ("executor_cap", "batch_cap"),
    [pytest.param(8, None, id="API-11-executor-cap"), pytest.param(2, 8, id="API-11-batch-cap")],
)
async def test_api_11_cap_8_runs_8_blocking_sync_bodies_at_once(
    executor_cap: int, batch_cap: int | None
) -> None:
    keys = [str(i) for i in range(8)]
    async with Rig(gated=keys, sync=True) as rig:
        executor = BatchExecutor(rig.reg, max_parallel_tool_calls=executor_cap)
        try:
            task = asyncio.ensure_future(executor.execute(rig.batch(*keys, cap=batch_cap)))
            await rig.started(*keys)
            assert rig.rec.running == 8
            rig.open(*keys)
            result = await task
        finally:
            rig.open(*keys)
            executor.close()
    assert rig.rec.max_running == 8
    assert all(not r.result.is_error for r in result.results)


async def test_api_11_two_batches_on_one_executor_each_get_their_cap_of_threads() -> None:
    keys = [str(i) for i in range(8)]
    async with Rig(gated=keys, sync=True) as rig:
        executor = BatchExecutor(rig.reg, max_parallel_tool_calls=4)
        try:
            first = asyncio.ensure_future(executor.execute(rig.batch(*keys[:4])))
            await rig.started(*keys[:4])
            second = asyncio.ensure_future(executor.execute(rig.batch(*keys[4:])))
            await rig.started(*keys[4:])  # share nothing but the registry: no thread starvation
            rig.open(*keys)
            await asyncio.gather(first, second)
        finally:
            rig.open(*keys)
            executor.close()
    assert rig.rec.max_running == 8
