"""Farm controls on Ray: results bounded in the worker, retries after real worker deaths,
one namespace-wide bucket per rate-limited tool, configured limits and bounds."""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest

from tests.actors import _farm_tools
from tests.actors._farm_tools import attempts_of, big_tool, dying_tool, stamped_tool, starts_of
from tests.core._farm_helpers import code_of, windows_ok
from toolray import AbortController, LogStep, MemoryEventLog, RateLimit, ToolBatchInput, ToolCall

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

cloudpickle.register_pickle_by_value(_farm_tools)


@pytest.fixture
def folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as path:
        yield path


def _batch(calls: list[ToolCall], scope: str, **kw: Any) -> ToolBatchInput:
    return ToolBatchInput(calls, kw.pop("signal", AbortController().signal), scope=scope, **kw)


async def test_a_5000_char_value_over_1000_bytes_fails_in_the_worker(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(big_tool("farm_big")))
    calls = [ToolCall("c1", "farm_big", {"n": 5000}), ToolCall("c2", "farm_big", {"n": 500})]
    out = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    too_large, fine = (r.result for r in out.results)
    assert code_of(too_large) == "RESULT_TOO_LARGE"
    assert "max_result_bytes (1000 bytes" in too_large.error.message
    assert fine.value == "x" * 500


async def test_an_idempotent_tool_survives_two_worker_deaths(
    rt: Any, scope_key: str, folder: str
) -> None:
    rt.owned.append(rt.registry.register(dying_tool("farm_dying", folder, 2, idempotent=True)))
    log = MemoryEventLog()
    calls = [ToolCall("c1", "farm_dying", {"key": "k"})]
    out = await rt.executor(scope_key).execute_batch(
        _batch(calls, scope_key, log=LogStep(1, 1, log))
    )
    assert out.results[0].result.value == "ok k"
    pids = attempts_of(folder, "k")
    assert len(pids) == 3
    assert len(set(pids)) == 3  # each attempt ran in a fresh process: two really died
    retries = [e for e in log.events if e["type"] == "tool/retry"]
    assert [(e["call_id"], e["attempt"], e["code"]) for e in retries] == [
        ("c1", 2, "WORKER_LOST"),
        ("c1", 3, "WORKER_LOST"),
    ]


async def test_a_tool_that_is_not_idempotent_is_not_rerun_after_a_death(
    rt: Any, scope_key: str, folder: str
) -> None:
    rt.owned.append(rt.registry.register(dying_tool("farm_once", folder, 2, idempotent=False)))
    log = MemoryEventLog()
    out = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c1", "farm_once", {"key": "k"})], scope_key, log=LogStep(1, 1, log))
    )
    assert code_of(out.results[0].result) == "WORKER_LOST"
    assert len(attempts_of(folder, "k")) == 1
    assert not [e for e in log.events if e["type"] == "tool/retry"]


async def test_sharded_executors_share_one_bucket(sharded_runtime: Any, folder: str) -> None:
    rt = sharded_runtime
    limit = RateLimit(10, burst=2)
    dispose = rt.registry.register(stamped_tool("farm_stamped", folder, limit))
    try:

        async def agent(k: int) -> Any:
            calls = [ToolCall(f"c{i}", "farm_stamped", {"i": i}) for i in range(8)]
            scope = f"farm-agent-{k}"
            return await rt.executor(scope).execute_batch(
                _batch(calls, scope, max_parallel_tool_calls=8)
            )

        outs = await asyncio.gather(*(agent(k) for k in range(4)))
        assert all(not r.result.is_error for out in outs for r in out.results)
        starts = starts_of(folder, "farm_stamped")
        assert len(starts) == 32
        assert windows_ok(starts, limit, slack=0.1)
        assert max(starts) - min(starts) >= 30 / 10 * 0.9  # held back by the one bucket
    finally:
        dispose()


async def test_a_waiting_call_on_ray_is_aborted_before_dispatch(
    rt: Any, scope_key: str, folder: str
) -> None:
    rt.owned.append(rt.registry.register(stamped_tool("farm_slow", folder, RateLimit(0.05))))
    ctrl = AbortController()
    calls = [ToolCall("c1", "farm_slow", {"i": 1}), ToolCall("c2", "farm_slow", {"i": 2})]
    log = MemoryEventLog()
    task = asyncio.ensure_future(
        rt.executor(scope_key).execute_batch(
            _batch(calls, scope_key, signal=ctrl.signal, log=LogStep(1, 1, log))
        )
    )
    for _ in range(2000):  # the first call committed: the second waits 20 s for a token
        if any(e["type"] == "tool/result" for e in log.events) or task.done():
            break
        await asyncio.sleep(0.01)
    ctrl.abort("user")
    out = await asyncio.wait_for(task, 30)
    assert [code_of(r.result) for r in out.results] == [None, "ABORTED_BEFORE_DISPATCH"]
    assert len(starts_of(folder, "farm_slow")) == 1


@pytest.fixture(scope="module")
def configured(ray_runtime: Any) -> Iterator[Any]:
    """A namespace whose configuration limits ``farm_ticker`` and bounds every result."""
    from toolray_actors import RayRuntime, RuntimeConfig

    base = ray_runtime.config.model_dump()
    config = RuntimeConfig.model_validate(
        {
            **base,
            "namespace": f"{base['namespace']}-farm-config",
            "rate_limits": {"farm_ticker": {"per_second": 5, "max_wait_ms": 300}},
            "max_result_bytes": 2000,
            "max_content_chars": 50,
        }
    )
    runtime = RayRuntime.start(config)
    yield runtime
    runtime.shutdown()


async def test_the_configuration_overrides_limits_and_bounds_results(
    configured: Any, folder: str
) -> None:
    rt = configured
    quick = RateLimit(1000, burst=10)  # the definition's; [rate_limits.farm_ticker] wins
    disposers = [
        rt.registry.register(stamped_tool("farm_ticker", folder, quick)),
        rt.registry.register(big_tool("farm_page", limit=None)),
    ]
    try:
        ticks = [ToolCall(f"t{i}", "farm_ticker", {"i": i}) for i in range(4)]
        out = await rt.executor("farm-cfg").execute_batch(
            _batch(ticks, "farm-cfg", max_parallel_tool_calls=4)
        )
        assert [code_of(r.result) for r in out.results] == [
            None,
            None,
            "RATE_LIMITED",
            "RATE_LIMITED",
        ]
        assert len(starts_of(folder, "farm_ticker")) == 2
        pages = [ToolCall("p1", "farm_page", {"n": 3000}), ToolCall("p2", "farm_page", {"n": 80})]
        out = await rt.executor("farm-cfg").execute_batch(_batch(pages, "farm-cfg"))
        too_large, cut = (r.result for r in out.results)
        assert code_of(too_large) == "RESULT_TOO_LARGE"
        assert cut.content[0]["text"] == "x" * 50 + "[… 30 characters truncated]"
    finally:
        for dispose in disposers:
            dispose()
