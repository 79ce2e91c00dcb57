"""For trainers, on Ray: waiting for capacity is not a tool fault; deadlines; fault classes.

A namespace of the session cluster with a ``narrow`` pool — one worker, one call process —
makes calls wait for capacity on purpose: the bodies mark when they started (a file, its
start time inside), so a test reads what waited and what never ran. Timing claims live in
the benchmarks; these tests assert outcomes, codes, classes and what ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import tools
from tests.actors._variants import variant_runtime
from toolray import (
    AbortController,
    Placement,
    TimeoutPolicy,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
)

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240)]

WAIT_S = 60.0
NARROW = Placement(pool="narrow")
NARROW_POOL = {
    "size": 1,
    "spare": 0,
    "warm_children": 1,
    "max_call_processes": 1,
}


@pytest.fixture(scope="module")
def trainer_rt(ray_runtime: Any) -> Iterator[Any]:
    """A namespace whose ``narrow`` pool runs one call at a time; ``queued`` bounds waits."""
    pools = {"narrow": NARROW_POOL, "queued": {**NARROW_POOL, "max_queue_ms": 300}}
    yield from variant_runtime(ray_runtime, "trainer", pools=pools)


@pytest.fixture
def rt(trainer_rt: Any) -> Iterator[Any]:
    owned: list[Any] = [TimeoutPolicy().install(trainer_rt.registry)]
    trainer_rt.owned = owned
    yield trainer_rt
    for dispose in reversed(owned):
        dispose()


def _codes(result: Any) -> list[str | None]:
    return [r.result.error.info.code if r.result.is_error else None for r in result.results]


def _started(folder: Path) -> dict[str, float]:
    return {p.stem: float(p.read_text()) for p in folder.glob("*.started")}


async def _run(rt: Any, scope: str, calls: list[ToolCall], **options: Any) -> Any:
    batch = ToolBatchInput(calls, AbortController().signal, scope=scope, **options)
    return await asyncio.wait_for(rt.executor(scope).execute_batch(batch), WAIT_S)


def _nap(key: str, seconds: float) -> ToolCall:
    return ToolCall(key, "trainer_nap", {"key": key, "s": seconds})


async def _warm(rt: Any, scope: str) -> None:
    """Run a quick call until the pool has its worker and process (starting is waiting)."""
    while _codes(await _run(rt, scope, [_nap("warm", 0)])) != [None]:
        pass


async def test_a_call_that_waits_for_a_process_is_not_timed_out(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    nap = tools.nap_tool("trainer_nap", str(tmp_path), timeout_ms=1500, placement=NARROW)
    rt.owned.append(rt.registry.register(nap))
    await _warm(rt, scope_key)
    calls = [_nap(f"k{i}", 0.6) for i in range(4)]  # one process: they run one by one
    result = await _run(rt, scope_key, calls, max_parallel_tool_calls=4)
    assert _codes(result) == [None] * 4
    assert [r.result.value for r in result.results] == ["k0", "k1", "k2", "k3"]
    starts = sorted(t for key, t in _started(tmp_path).items() if key != "warm")
    assert len(starts) == 4
    # the last body started well past the timeout after the first: it waited, and was not
    # blamed for it (its 1,500 ms counted from its own start)
    assert starts[-1] - starts[0] > 1.5
    assert result.faults["tool"] == 0


async def test_a_body_that_overruns_its_own_budget_is_still_timed_out(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    nap = tools.nap_tool("trainer_nap", str(tmp_path), timeout_ms=300, placement=NARROW)
    rt.owned.append(rt.registry.register(nap))
    result = await _run(rt, scope_key, [_nap("slow", 20), _nap("after", 0)])
    assert _codes(result) == ["TOOL_TIMEOUT", None]
    failure = result.results[0].result
    assert failure.error.fault == "tool"
    assert "terminated" in (failure.error.info.reason or "")  # the ladder killed it
    assert set(_started(tmp_path)) == {"slow", "after"}


async def test_past_max_queue_ms_a_waiting_call_is_overloaded_and_never_runs(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    queued = Placement(pool="queued")
    nap = tools.nap_tool("trainer_nap", str(tmp_path), placement=queued)
    rt.owned.append(rt.registry.register(nap))
    await _warm(rt, scope_key)  # a pool's first workers starting is a wait for capacity too
    result = await _run(rt, scope_key, [_nap("first", 2), _nap("second", 0)])
    assert _codes(result) == [None, "OVERLOADED"]
    overloaded = result.results[1].result.error
    assert overloaded.fault == "infra"
    assert "max_queue_ms" in overloaded.message
    assert set(_started(tmp_path)) == {"warm", "first"}  # the second body never ran
    assert dict(result.faults) == {"input": 0, "policy": 0, "tool": 0, "infra": 1, "cancelled": 0}


async def test_a_deadline_stops_the_running_call_and_the_waiting_one_never_runs(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    nap = tools.nap_tool("trainer_nap", str(tmp_path), placement=NARROW)
    rt.owned.append(rt.registry.register(nap))
    await _warm(rt, scope_key)
    calls = [ToolCall("bad", "trainer_nope", {}), _nap("hung", 30), _nap("waiting", 0)]
    result = await _run(rt, scope_key, calls, deadline_s=3)
    assert _codes(result) == ["UNKNOWN_TOOL", "DEADLINE_EXCEEDED", "DEADLINE_EXCEEDED"]
    hung, waiting = (r.result.error for r in result.results[1:])
    assert hung.message == "tool call stopped: the batch's deadline of 3s passed"
    assert "terminated" in (hung.info.reason or "")  # its process was killed
    assert waiting.message == "tool call not started: the batch's deadline of 3s passed"
    assert set(_started(tmp_path)) == {"warm", "hung"}
    assert [r.result.error.fault for r in result.results] == ["input", "cancelled", "cancelled"]


async def test_a_streamed_batch_and_one_call_keep_their_deadline(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    nap = tools.nap_tool("trainer_nap", str(tmp_path), placement=NARROW)
    rt.owned.append(rt.registry.register(nap))
    await _warm(rt, scope_key)
    batch = ToolBatchInput([_nap("quick", 0), _nap("hung", 30)], scope=scope_key, deadline_s=3)
    seen = [item async for item in rt.executor(scope_key).stream_batch(batch)]
    assert [index for index, _ in seen] == [0, 1]
    assert [r.result.error.info.code if r.result.is_error else None for _, r in seen] == [
        None,
        "DEADLINE_EXCEEDED",
    ]
    inp = ToolExecutionInput(
        "one", "trainer_nap", {"key": "one", "s": 30}, AbortController().signal
    )
    inp = ToolExecutionInput(inp.call_id, inp.name, inp.arguments, inp.signal, scope=scope_key)
    one = await asyncio.wait_for(rt.executor(scope_key).execute(inp, deadline_s=0.5), WAIT_S)
    assert one.error.info.code == "DEADLINE_EXCEEDED"
    assert one.error.fault == "cancelled"
    via_registry = await asyncio.wait_for(rt.registry.execute(inp, deadline_s=0), WAIT_S)
    assert via_registry.error.info.code == "DEADLINE_EXCEEDED"  # nothing runs at 0
    with pytest.raises(ValueError, match="deadline_s"):
        await rt.executor(scope_key).execute(inp, deadline_s=-1)


async def test_a_policy_denial_keeps_its_class_across_the_executor(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt.owned.append(rt.registry.register(tools.echo_tool("trainer_echo")))
    rt.owned.append(rt.registry.guard(tools.deny_guard("trainer_echo", "not now")))
    result = await _run(rt, scope_key, [ToolCall("c1", "trainer_echo", "{}")])
    error = result.results[0].result.error
    assert (error.info, error.fault) == (None, "policy")  # uncoded, and still a denial
