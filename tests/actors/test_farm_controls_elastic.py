"""Elastic pools on Ray: a burst grows a pool to ``max_size``, idleness shrinks it back.

The bodies hold until the test opens a file gate, so the burst's calls wait for workers
for as long as the test looks; growth and shrink are observed through ``rt.stats()``.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.actors import _farm_tools
from tests.actors._farm_tools import gated_tool
from toolray import AbortController, Placement, ToolBatchInput, ToolCall

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

cloudpickle.register_pickle_by_value(_farm_tools)

ELASTIC = Placement(min_size=1, max_size=3, idle_s=1.0, max_concurrency=1, spare=0)


@pytest.fixture
def gate() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder) / "open"


def _pool(rt: Any) -> Any:
    sizes = [p for p in rt.stats().pools if p.max_size == 3 and p.min_size == 1]
    return sizes[0] if sizes else None


async def _until(rt: Any, check: Any, what: str, within: float = 60) -> Any:
    for _ in range(int(within / 0.1)):
        pool = await asyncio.to_thread(_pool, rt)
        if pool is not None and check(pool):
            return pool
        await asyncio.sleep(0.1)  # polling the cluster's state (bounded)
    raise AssertionError(f"never: {what} (last: {pool})")


async def test_a_burst_grows_the_pool_to_max_size_and_idleness_shrinks_it(
    rt: Any, scope_key: str, gate: Path
) -> None:
    rt.owned.append(rt.registry.register(gated_tool("farm_gated", str(gate), ELASTIC)))
    calls = [ToolCall(f"c{i}", "farm_gated", {"i": i}) for i in range(6)]
    batch = ToolBatchInput(calls, AbortController().signal, scope=scope_key)
    task = asyncio.ensure_future(rt.executor(scope_key).execute_batch(batch))
    grown = await _until(rt, lambda p: p.workers == 3, "the pool grew to max_size")
    assert grown.size == 3
    assert grown.grown >= 2
    await asyncio.to_thread(gate.touch)
    out = await asyncio.wait_for(task, 120)
    assert [r.result.value for r in out.results] == list(range(6))  # no call lost
    shrunk = await _until(rt, lambda p: p.size == 1, "idle workers were retired")
    assert shrunk.workers == 1
    assert shrunk.retired >= 2
    again = await rt.executor(scope_key).execute_batch(
        ToolBatchInput(calls[:2], AbortController().signal, scope=scope_key)
    )
    assert [r.result.value for r in again.results] == [0, 1]
