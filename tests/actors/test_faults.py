"""Faults with real actors: crashes, raising bodies, dead executors, restarts."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
import ray

from tests.actors._waits import stats_when
from tests.tools import cooperative_tool, crash_tool, failing_tool, text_echo_tool
from toolray import AbortController, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope)


async def test_a_raising_body_is_one_failure_and_the_batch_goes_on(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(failing_tool("rt_fail")))
    rt.owned.append(rt.registry.register(text_echo_tool("rt_after_fail")))
    out = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c1", "rt_fail", "{}"), ToolCall("c2", "rt_after_fail", "{}")], scope_key)
    )
    failure = out.results[0].result
    assert failure.error.message == "disk full"
    assert (failure.error.info.name, failure.error.info.code) == ("HarnessError", "ENOSPC")
    assert failure.content == [{"type": "text", "text": "Error: disk full"}]
    assert not out.results[1].result.is_error


def _worker_pids(rt: Any) -> set[int]:
    return {a.pid for a in rt.stats().actors if a.kind == "worker"}


async def test_a_crashing_body_fails_its_own_call_and_only_its_process_is_replaced(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(crash_tool("rt_crash")))
    rt.owned.append(rt.registry.register(text_echo_tool("rt_after_crash")))
    ex = rt.executor(scope_key)
    await ex.execute_batch(_batch([ToolCall("c0", "rt_after_crash", "{}")], scope_key))
    before, workers = rt.stats(), _worker_pids(rt)
    out = await ex.execute_batch(_batch([ToolCall("c1", "rt_crash", "{}")], scope_key))
    lost = out.results[0].result
    assert lost.error.info.code == "WORKER_LOST"
    assert "the call's process exited with status 17" in lost.error.message
    assert "not re-run" in lost.error.message
    after = await stats_when(rt, lambda s: s.child_replacements > before.child_replacements)
    assert after.child_deaths == before.child_deaths + 1
    assert after.replacements == before.replacements  # no worker actor was replaced…
    assert _worker_pids(rt) == workers  # …or restarted
    again = await ex.execute_batch(
        _batch([ToolCall("c2", "rt_after_crash", '{"text": "ok"}')], scope_key)
    )
    assert again.results[0].result.value["text"] == "ok"


async def test_shared_a_worker_that_dies_gives_worker_lost_and_is_replaced(
    shared_rt: Any, scope_key: str
) -> None:
    rt = shared_rt
    rt.owned.append(rt.registry.register(crash_tool("rt_crash")))
    rt.owned.append(rt.registry.register(text_echo_tool("rt_after_crash")))
    await rt.executor(scope_key).execute_batch(  # the pool is up
        _batch([ToolCall("c0", "rt_after_crash", "{}")], scope_key)
    )
    before = rt.stats()
    out = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c1", "rt_crash", "{}")], scope_key)
    )
    lost = out.results[0].result
    assert lost.error.info.code == "WORKER_LOST"
    assert "not re-run" in lost.error.message
    after = await stats_when(rt, lambda s: s.replacements > before.replacements)
    assert after.replacements == before.replacements + 1
    assert after.workers == before.workers
    again = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c2", "rt_after_crash", '{"text": "ok"}')], scope_key)
    )
    assert again.results[0].result.value["text"] == "ok"


async def test_shared_a_worker_killed_while_idle_is_replaced_at_once_and_no_call_is_lost_to_it(
    shared_rt: Any, scope_key: str
) -> None:
    """The pool learns of the death itself; a call sent to the dead worker goes elsewhere.

    The executor still lists the dead worker (no call of its met the death): before, its
    calls sent there failed ``WORKER_LOST`` though they never ran, and the pool replaced
    the worker only then.
    """
    rt = shared_rt
    rt.owned.append(rt.registry.register(text_echo_tool("rt_idle_death")))
    ex = rt.executor(scope_key)
    calls = [ToolCall(f"c{i}", "rt_idle_death", '{"text": "a"}') for i in range(8)]
    first = await ex.execute_batch(_batch(calls, scope_key))
    pids = {r.result.value["pid"] for r in first.results}
    victim = min(pids)
    assert victim in _worker_pids(rt)  # "shared": the body ran in the worker itself
    before = rt.stats()
    os.kill(victim, signal.SIGKILL)
    after = await stats_when(rt, lambda s: s.replacements > before.replacements)
    assert after.workers == before.workers
    assert victim not in _worker_pids(rt)
    again = await ex.execute_batch(_batch(calls, scope_key))
    assert [r.result.is_error for r in again.results] == [False] * 8, again.results
    assert victim not in {r.result.value["pid"] for r in again.results}
    assert rt.stats().workers_lost == before.workers_lost  # no call met the death


async def test_an_executor_killed_mid_batch_gives_executor_lost_and_the_next_batch_a_fresh_one(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(cooperative_tool("rt_hold")))
    rt.owned.append(rt.registry.register(text_echo_tool("rt_fresh")))
    ex = rt.executor(scope_key)
    task = asyncio.ensure_future(
        ex.execute_batch(_batch([ToolCall("c1", "rt_hold", "{}")], scope_key))
    )
    for _ in range(300):
        if (await ex.statistics()).in_flight:
            break
        await asyncio.sleep(0.01)
    ray.kill(ray.get_actor(ex.name, namespace=rt.config.namespace))
    lost = await asyncio.wait_for(task, timeout=60)
    assert [r.call_id for r in lost.results] == ["c1"]
    assert lost.results[0].result.error.info.code == "EXECUTOR_LOST"
    out = await ex.execute_batch(_batch([ToolCall("c2", "rt_fresh", '{"text": "new"}')], scope_key))
    assert out.results[0].result.value["text"] == "new"


async def test_the_registry_actor_restarts_with_its_state(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("rt_survivor")))
    scope = rt.scope(scope_key)
    rt.owned.append(scope.register(text_echo_tool("rt_scoped_survivor")))
    ex = rt.executor(scope_key)
    await ex.execute_batch(_batch([ToolCall("c0", "rt_survivor", "{}")], scope_key))
    restarts = rt.registry.info()["restarts"]
    actor = ray.get_actor("toolray:registry", namespace=rt.config.namespace)
    ray.kill(actor, no_restart=False)
    for _ in range(600):
        try:
            info = rt.registry.info()
        except Exception:
            await asyncio.sleep(0.02)
            continue
        if info["restarts"] > restarts:
            break
    names = [s["name"] for s in rt.registry.schemas(scope_key)]
    assert "rt_survivor" in names
    assert "rt_scoped_survivor" in names
    # writes after the restart still reach the executor's mirror
    rt.owned.append(rt.registry.register(text_echo_tool("rt_after_restart")))
    out = await ex.execute_batch(
        _batch([ToolCall("c1", "rt_after_restart", '{"text": "r"}')], scope_key)
    )
    assert out.results[0].result.value["text"] == "r"
