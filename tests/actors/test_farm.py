"""The farm runtime on the session cluster: executor crashes (real SIGKILLs),
driver-side cancellation, blocking calls inside a running loop, recreation after a reap."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools import cooperative_tool, text_echo_tool
from toolray import AbortController, JsonlEventLog, LogStep, ToolBatchInput, ToolCall, read_jsonl

pytestmark = pytest.mark.ray


def _batch(calls: list[ToolCall], scope: str, **kw: Any) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope, **kw)


async def _until(predicate: Any, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not await predicate():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.02)


async def test_an_executor_sigkilled_mid_batch_keeps_what_committed_and_loses_the_rest(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("farm_echo")))
    rt.owned.append(rt.registry.register(cooperative_tool("farm_hold")))
    ex = rt.executor(scope_key)
    path = tmp_path / "session.jsonl"
    calls = [
        ToolCall("c1", "farm_echo", '{"text": "kept"}'),
        ToolCall("c2", "farm_hold", "{}"),
        ToolCall("c3", "farm_echo", '{"text": "never"}'),
    ]
    seen: list[tuple[int, Any]] = []
    with JsonlEventLog(path) as log:
        batch = _batch(calls, scope_key, log=LogStep(1, 2, log), max_parallel_tool_calls=2)
        async for index, item in ex.stream_batch(batch):
            seen.append((index, item))
            if index == 0:  # c1 committed, c2 is running: kill the executor's process
                os.kill((await ex.statistics()).pid, signal.SIGKILL)
    assert [i for i, _ in seen] == [0, 1, 2]
    assert seen[0][1].result.value["text"] == "kept"
    for _, lost in seen[1:]:
        assert lost.result.error.info.code == "EXECUTOR_LOST"
        assert lost.result.error.info.name == "ExecutorLostError"
        assert "not re-run" in lost.result.error.message
    records = read_jsonl(path)
    pairs = [(r["type"], r["callId"]) for r in records]
    for call in calls:  # one tool/call and one tool/result per call, whatever happened
        assert pairs.count(("tool/call", call.id)) == 1
        assert pairs.count(("tool/result", call.id)) == 1
    assert records[pairs.index(("tool/result", "c1"))]["result"]["isError"] is False
    assert all(r["turn"] == 1 and r["step"] == 2 for r in records)
    again = await ex.execute_batch(
        _batch([ToolCall("c9", "farm_echo", '{"text": "x"}')], scope_key)
    )
    assert again.results[0].result.value["text"] == "x"


async def test_execute_batch_returns_executor_lost_results_instead_of_raising(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(cooperative_tool("farm_hold2")))
    ex = rt.executor(scope_key)
    task = asyncio.ensure_future(
        ex.execute_batch(_batch([ToolCall("h1", "farm_hold2", "{}")], scope_key))
    )

    async def running() -> bool:
        return (await ex.statistics()).in_flight == 1

    await _until(running)
    os.kill((await ex.statistics()).pid, signal.SIGKILL)
    out = await asyncio.wait_for(task, timeout=60)
    assert [r.call_id for r in out.results] == ["h1"]
    assert out.results[0].result.error.info.code == "EXECUTOR_LOST"


async def test_an_executor_sigkilled_between_batches_is_recreated(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("farm_echo2")))
    ex = rt.executor(scope_key)
    batch = _batch([ToolCall("c1", "farm_echo2", '{"text": "a"}')], scope_key)
    await ex.execute_batch(batch)
    pid = (await ex.statistics()).pid
    os.kill(pid, signal.SIGKILL)
    out = await ex.execute_batch(batch)
    assert out.results[0].result.value["text"] == "a"
    assert (await ex.statistics()).pid != pid


async def test_cancelling_the_awaiting_task_aborts_the_remote_batch(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(cooperative_tool("farm_hold3")))
    ex = rt.executor(scope_key)
    task = asyncio.ensure_future(
        ex.execute_batch(_batch([ToolCall("h1", "farm_hold3", "{}")], scope_key))
    )

    async def running() -> bool:
        return (await ex.statistics()).in_flight == 1

    await _until(running)
    before = (await ex.statistics()).aborts
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    cancelled_at = time.monotonic()

    async def settled() -> bool:
        return (await ex.statistics()).in_flight == 0

    await _until(settled, within=rt.config.kill_grace_ms / 1000 + 1.0)
    assert time.monotonic() - cancelled_at <= rt.config.kill_grace_ms / 1000 + 1.0
    assert (await ex.statistics()).aborts == before + 1  # the body's signal fired


async def test_execute_batch_sync_works_inside_a_running_event_loop(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("farm_sync")))
    asyncio.get_running_loop()  # as in Jupyter: a loop is running in this thread
    out = rt.executor(scope_key).execute_batch_sync(
        _batch([ToolCall("c1", "farm_sync", '{"text": "nb"}')], scope_key)
    )
    assert out.results[0].result.value["text"] == "nb"


async def test_mapping_arguments_run_and_bad_ones_fail_only_their_call_on_ray(
    rt: Any, scope_key: str
) -> None:
    """P-ARGS-4 on Ray: a Mapping is parsed arguments; anything else is that call's
    INVALID_ARGS; non-JSON values in a Mapping fail the lossless check; the batch goes on."""
    rt.owned.append(rt.registry.register(text_echo_tool("farm_args")))
    calls = [
        ToolCall("c1", "farm_args", {"text": "mapped"}),
        ToolCall("c2", "farm_args", 42),  # type: ignore[arg-type]
        ToolCall("c3", "farm_args", {"text": float("nan")}),
        ToolCall("c4", "farm_args", '{"text": "after"}'),
    ]
    out = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    assert [r.call_id for r in out.results] == ["c1", "c2", "c3", "c4"]
    assert out.results[0].result.value["text"] == "mapped"
    assert out.results[1].result.error.info.code == "INVALID_ARGS"
    assert "must be a str (JSON text) or a Mapping, not int" in out.results[1].result.error.message
    lossy = out.results[2].result
    assert lossy.error.message == "tool execution arguments must be losslessly JSON-serializable"
    assert lossy.error.info is None
    assert out.results[3].result.value["text"] == "after"


async def test_a_sigkilled_pool_manager_costs_its_calls_and_the_pool_comes_back(
    rt: Any, scope_key: str
) -> None:
    """Regression (chaos campaign): a restarted pool manager reuses worker ids and versions;
    the executor used to spin forever on an empty pool. Now the calls on its workers fail
    WORKER_LOST and the next batch runs on the new incarnation's workers."""
    rt.owned.append(rt.registry.register(cooperative_tool("farm_pool_hold")))
    rt.owned.append(rt.registry.register(text_echo_tool("farm_pool_echo")))
    ex = rt.executor(scope_key)
    task = asyncio.ensure_future(
        ex.execute_batch(_batch([ToolCall("h1", "farm_pool_hold", "{}")], scope_key))
    )

    async def running() -> bool:
        return (await ex.statistics()).in_flight == 1

    await _until(running)
    pool = next(a for a in rt.stats().actors if a.name == "toolray:pool:default")
    os.kill(pool.pid, signal.SIGKILL)
    held = await asyncio.wait_for(task, timeout=60)
    assert held.results[0].result.error.info.code == "WORKER_LOST"
    for n in range(2):  # twice: the replacement pool serves every later batch
        out = await asyncio.wait_for(
            ex.execute_batch(
                _batch([ToolCall(f"e{n}", "farm_pool_echo", '{"text": "back"}')], scope_key)
            ),
            timeout=120,
        )
        assert not out.results[0].result.is_error, out.results[0].result.error
        assert out.results[0].result.value["text"] == "back"
