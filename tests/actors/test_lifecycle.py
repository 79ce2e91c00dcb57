"""Executor actors: created on first use, named by scope, reaped after an idle TTL."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psutil
import pytest
import ray

from tests.tools import text_echo_tool
from toolray import AbortController, ToolBatchInput, ToolCall, ToolExecutionInput
from toolray_actors import PoolConfig, RayRuntime, RuntimeConfig

pytestmark = pytest.mark.ray


def _echo(rt: RayRuntime, tool: str, scope: str) -> tuple[Any, ToolBatchInput]:
    """``scope``'s executor handle and a one-call batch of the echo tool ``tool`` (registered)."""
    rt.registry.register(text_echo_tool(tool))
    call = ToolCall("c1", tool, '{"text": "a"}')
    return rt.executor(scope), ToolBatchInput([call], AbortController().signal, scope=scope)


def _reaping(namespace: str) -> RayRuntime:
    """A runtime whose executors are reaped after 2 idle seconds (attaches to the session's Ray)."""
    pool = PoolConfig(size=1, spare=0, max_concurrency=8)
    return RayRuntime.start(RuntimeConfig(namespace=namespace, executor_idle_ttl_s=2.0, pool=pool))


async def test_an_idle_executor_is_reaped_and_the_next_batch_gets_a_new_one(
    ray_runtime: Any,
) -> None:
    rt = _reaping("toolray-reap-test")
    config = rt.config
    try:
        ex, batch = _echo(rt, "reap_echo", "idle-agent")
        first = await ex.execute_batch(batch)
        pid = (await ex.statistics()).pid
        assert first.results[0].result.value["text"] == "a"
        assert ray.get_actor(ex.name, namespace=config.namespace) is not None
        deadline = time.monotonic() + 30
        while True:  # wait (bounded) for the reaper
            try:
                ray.get_actor(ex.name, namespace=config.namespace)
            except ValueError:
                break
            assert time.monotonic() < deadline, "the idle executor was never reaped"
            await asyncio.sleep(0.1)
        assert "toolray:executor:idle-agent" not in rt.registry.info()["executors"]
        assert _calls(rt, "reap_echo") == 1  # what the reaped executor counted stays counted
        # the handle still holds the reaped actor: every call recreates it transparently
        one = await ex.execute(
            ToolExecutionInput(
                "e1", "reap_echo", {"text": "b"}, AbortController().signal, scope="idle-agent"
            )
        )
        assert one.value["text"] == "b"
        second = await ex.execute_batch(batch)
        assert second.results[0].result.value["text"] == "a"
        assert (await ex.statistics()).pid != pid
        assert _calls(rt, "reap_echo") == 3
        assert rt.registry.names("idle-agent") == ["reap_echo"]
        assert rt.registry.get("reap_echo", "idle-agent") is not None
        assert rt.registry.info()["leases"] >= 1
    finally:
        rt.shutdown()


async def _reaped(pid: int, why: str) -> None:
    """Wait (bounded) for the reaper to end the executor process ``pid``."""
    deadline = time.monotonic() + 30
    while psutil.pid_exists(pid):
        assert time.monotonic() < deadline, why
        await asyncio.sleep(0.1)


def _calls(rt: RayRuntime, tool: str) -> int:
    return sum(t.calls for t in rt.stats().tools if t.name == tool)


def test_a_disposed_scopes_counters_stay_in_the_namespaces_totals(ray_runtime: Any) -> None:
    rt = _reaping("toolray-dispose-counts")
    try:
        for scope in ("gone-1", "gone-2"):
            ex, batch = _echo(rt, "gone_echo", scope)
            bad = ToolBatchInput([ToolCall("c2", "gone_echo", "{not json")], scope=scope)
            assert ex.execute_batch_sync(batch).results[0].result.value["text"] == "a"
            assert ex.execute_batch_sync(bad).results[0].result.error is not None
        before = {t.name: t for t in rt.stats().tools}["gone_echo"]
        assert (before.calls, sum(before.failures.values())) == (4, 2)
        for scope in ("gone-1", "gone-2"):
            rt.scope(scope).dispose()  # its executor is killed at once
        assert rt.stats().executors == ()
        after = {t.name: t for t in rt.stats().tools}["gone_echo"]
        assert (after.calls, after.failures) == (before.calls, before.failures)
    finally:
        rt.shutdown()


async def test_a_handle_kept_across_a_reap_sends_its_next_one_call_batch_to_a_new_executor(
    ray_runtime: Any,
) -> None:
    from toolray_actors._ledger import sweep

    rt = _reaping("toolray-reap-ledger")
    try:
        ex, batch = _echo(rt, "reap_ledger_echo", "idle-ledger")
        await ex.execute_batch(batch)
        pid = (await ex.statistics()).pid
        ledger = ex._ready.ledger.path
        old = time.time() - 600  # as if its last batch were ten minutes ago
        os.utime(ledger, (old, old))
        await _reaped(pid, "the idle executor was never reaped")
        sweep()  # another executor starting on this node: the ledger stays a while yet
        assert os.path.exists(ledger)
        again = await ex.execute_batch(batch)  # the handle still holds the reaped actor
        assert again.results[0].result.value["text"] == "a"
        assert (await ex.statistics()).pid != pid
    finally:
        rt.shutdown()


async def test_a_reservation_whose_batch_never_came_does_not_keep_the_executor_alive(
    ray_runtime: Any,
) -> None:
    """A driver reserved a batch id and died (or was cancelled) before sending the batch."""
    rt = _reaping("toolray-reap-orphan")
    try:
        ex, batch = _echo(rt, "orphan_echo", "orphan-agent")
        await ex.execute_batch(batch)
        pid = (await ex.statistics()).pid
        actor = ray.get_actor(ex.name, namespace=rt.config.namespace)
        assert await actor.reserve.remote("never-sent-1", "never-sent-2")
        await _reaped(pid, "a lone reservation kept the executor alive")
        again = await ex.execute_batch(batch)  # the scope goes on on a new executor
        assert again.results[0].result.value["text"] == "a"
    finally:
        rt.shutdown()
