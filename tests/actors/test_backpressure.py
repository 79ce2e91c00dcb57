"""Backpressure on Ray: a driver faster than the farm waits, in order, visibly, losing nothing.

A namespace of its own on the session cluster: one shard, and ``[executors]
max_batches_in_flight = 2``. Gate bodies hold their batches (marker files say which started),
so what is in flight and what waits is known without timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools import gate_tool
from toolray import AbortController, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

WAIT_S = 30.0


@pytest.fixture(scope="module")
def bounded(ray_runtime: Any) -> Iterator[Any]:
    from toolray_actors import RayRuntime, RuntimeConfig

    base = ray_runtime.config.model_dump()
    cfg = RuntimeConfig.model_validate(
        {
            **base,
            "namespace": f"{base['namespace']}-bounded",
            "executors": {"mode": "sharded", "shards": 1, "max_batches_in_flight": 2},
        }
    )
    runtime = RayRuntime.start(cfg)
    yield runtime
    runtime.shutdown()


def _gated(key: str, *, deadline_s: float | None = None) -> ToolBatchInput:
    calls = [ToolCall(f"{key}-c", "bp_gate", {"key": key})]
    return ToolBatchInput(calls, AbortController().signal, scope=key, deadline_s=deadline_s)


async def _until(what: str, ready: Any) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.005)


def _started(directory: Path) -> set[str]:
    return {p.name.removesuffix(".started") for p in directory.glob("*.started")}


async def test_a_driver_faster_than_the_farm_waits_in_order_and_loses_nothing(
    bounded: Any, tmp_path: Path
) -> None:
    dispose = bounded.registry.register(gate_tool("bp_gate", str(tmp_path)))
    try:
        keys = [f"bp-{i}" for i in range(6)]
        runs = [asyncio.ensure_future(bounded.executor(k).execute_batch(_gated(k))) for k in keys]
        await _until("two batches started", lambda: _started(tmp_path) == set(keys[:2]))
        stats = await asyncio.to_thread(bounded.stats)
        assert (stats.batches_in_flight, stats.batches_waiting) == (2, 4)
        assert stats.batches_waited == 4
        assert _started(tmp_path) == set(keys[:2])  # the others were never sent

        (tmp_path / f"{keys[1]}.open").touch()  # one ends: the first waiting one goes
        await _until("the third started", lambda: keys[2] in _started(tmp_path))
        assert _started(tmp_path) == set(keys[:3])
        for key in keys:
            (tmp_path / f"{key}.open").touch()
        results = await asyncio.wait_for(asyncio.gather(*runs), WAIT_S)
        for key, result in zip(keys, results, strict=True):
            (one,) = result.results
            assert one.result.value["key"] == key
        stats = await asyncio.to_thread(bounded.stats)
        assert (stats.batches_in_flight, stats.batches_waiting) == (0, 0)
    finally:
        dispose()


async def test_a_waiting_batch_still_ends_by_its_deadline(bounded: Any, tmp_path: Path) -> None:
    dispose = bounded.registry.register(gate_tool("bp_gate", str(tmp_path)))
    try:
        held = [f"hold-{i}" for i in range(2)]
        runs = [asyncio.ensure_future(bounded.executor(k).execute_batch(_gated(k))) for k in held]
        await _until("both held", lambda: _started(tmp_path) == set(held))
        late = await asyncio.wait_for(
            bounded.executor("late").execute_batch(_gated("late", deadline_s=0.2)), WAIT_S
        )
        (one,) = late.results
        assert one.result.is_error
        assert one.result.error.info.code == "DEADLINE_EXCEEDED"
        assert "late" not in _started(tmp_path)  # it never ran
        for key in held:
            (tmp_path / f"{key}.open").touch()
        for result in await asyncio.wait_for(asyncio.gather(*runs), WAIT_S):
            assert not result.results[0].result.is_error
    finally:
        dispose()
