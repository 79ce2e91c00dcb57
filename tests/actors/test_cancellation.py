"""The cancellation ladder on real worker actors."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.actors._waits import stats_when
from tests.tools import cooperative_tool, stubborn_tool
from toolray import AbortController, TimeoutPolicy, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray


def _install_timeouts(rt: Any) -> None:
    """A TimeoutPolicy on the global layer, shipped to the executors like any hook."""
    rt.owned.append(TimeoutPolicy().install(rt.registry))


async def test_cooperative_body_stops_on_the_forwarded_abort(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(cooperative_tool("rt_coop")))
    ex = rt.executor(scope_key)
    ctrl = AbortController()
    batch = ToolBatchInput([ToolCall("c1", "rt_coop", "{}")], ctrl.signal, scope=scope_key)
    task = asyncio.ensure_future(ex.execute_batch(batch))
    for _ in range(200):  # wait until the body is running on a worker
        stats = await ex.statistics()
        if stats.in_flight:
            break
        await asyncio.sleep(0.01)
    kills_before = rt.stats().kills
    ctrl.abort("user cancelled")
    result = await asyncio.wait_for(task, timeout=30)
    failure = result.results[0].result
    assert failure.error.info.code == "ABORTED"
    assert failure.error.info.reason is None  # stopped cooperatively: nobody was killed
    assert rt.stats().kills == kills_before


@pytest.mark.parametrize(
    ("kind", "reason_part"),
    [
        # A body that runs Python is interrupted; on a starved machine the interrupt may not
        # land within the grace, and the ladder's next step (the kill) stops it instead.
        ("sleep_loop", ("interrupted", "ray.cancel", "terminated")),
        ("cpu", ("interrupted", "ray.cancel", "terminated")),
        ("block", ("terminated",)),
    ],
)
async def test_a_body_ignoring_its_deadline_is_stopped_as_tool_timeout(
    rt: Any, scope_key: str, kind: str, reason_part: tuple[str, ...]
) -> None:
    name = f"rt_stubborn_{kind}"
    rt.owned.append(rt.registry.register(stubborn_tool(name, kind, timeout_ms=200)))
    _install_timeouts(rt)
    before = rt.stats()
    result = await rt.executor(scope_key).execute_batch(
        ToolBatchInput(
            [ToolCall("c1", name, '{"seconds": 30}')], AbortController().signal, scope=scope_key
        )
    )
    failure = result.results[0].result
    assert failure.error.message == "tool call timed out after 200ms"
    assert failure.error.info.code == "TOOL_TIMEOUT"
    assert any(part in failure.error.info.reason for part in reason_part)
    if kind == "block":  # only a kill stopped it: the call's process, not the worker
        assert "the call's process was terminated" in failure.error.info.reason
        after = await stats_when(rt, lambda s: s.child_kills > before.child_kills)
        assert after.kills == before.kills + 1
        assert after.child_kills == before.child_kills + 1
        assert after.replacements == before.replacements  # no worker actor was replaced


async def test_shared_a_body_ignoring_its_deadline_costs_its_worker(
    shared_rt: Any, scope_key: str
) -> None:
    rt = shared_rt
    rt.owned.append(
        rt.registry.register(stubborn_tool("rt_stubborn_shared", "block", timeout_ms=200))
    )
    _install_timeouts(rt)
    ex = rt.executor(scope_key)
    await ex.execute_batch(  # the pool is up
        ToolBatchInput(
            [ToolCall("c0", "rt_stubborn_shared", '{"seconds": 0}')],
            AbortController().signal,
            scope=scope_key,
        )
    )
    before = rt.stats()
    result = await ex.execute_batch(
        ToolBatchInput(
            [ToolCall("c1", "rt_stubborn_shared", '{"seconds": 30}')],
            AbortController().signal,
            scope=scope_key,
        )
    )
    failure = result.results[0].result
    assert failure.error.info.code == "TOOL_TIMEOUT"
    assert "the worker was terminated" in failure.error.info.reason
    after = await stats_when(rt, lambda s: s.replacements > before.replacements)
    assert after.kills == before.kills + 1
    assert after.workers == before.workers  # the pool was refilled (in the background)
