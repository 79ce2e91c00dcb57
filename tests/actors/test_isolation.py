"""Per-call fault isolation with real processes and real faults: a fault fails only its call.

One batch of 20 concurrency-safe calls on a one-worker pool: 16 patient bodies (they wait
for a gate) and four faulty ones — ``os._exit``, a segfault, an allocation past the memory
limit, a body deaf to its 4 s deadline. The faults strike only once every patient body
has started, so all 20 share the worker when they do.

- ``isolation="call"``: exactly the four fail, each with its code (``WORKER_LOST`` ×3,
  ``TOOL_TIMEOUT``); the 16 succeed once their gate opens; the worker actor is the same
  process before, during and after; the next batch runs at once on the same worker.
- ``isolation="shared"`` (the documented blast radius): the crash takes the worker and
  every call it held — all 19 calls of the batch fail ``WORKER_LOST`` — and the next batch
  runs on a new worker process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools import faulty_tool, patient_tool, text_echo_tool
from toolray import AbortController, Placement, TimeoutPolicy, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

WAIT_S = 60.0


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(
        calls, AbortController().signal, scope=scope, max_parallel_tool_calls=len(calls)
    )


async def _when_started(directory: Path, keys: list[str]) -> None:
    """Wait (bounded) until every patient body has marked itself started."""
    deadline = time.monotonic() + WAIT_S
    while not all((directory / f"{k}.started").exists() for k in keys):
        if time.monotonic() > deadline:
            raise AssertionError("the patient bodies never all started")
        await asyncio.sleep(0.01)


def _register(rt: Any, placement: Placement, directory: Path, faults: list[str]) -> None:
    tag = placement.isolation
    for kind in faults:
        rt.owned.append(
            rt.registry.register(faulty_tool(f"iso_{kind}_{tag}", kind, str(directory), placement))
        )
    rt.owned.append(
        rt.registry.register(patient_tool(f"iso_patient_{tag}", str(directory), placement))
    )
    echo = dataclasses.replace(text_echo_tool(f"iso_echo_{tag}"), placement=placement)
    rt.owned.append(rt.registry.register(echo))
    rt.owned.append(TimeoutPolicy().install(rt.registry))


async def _run_with_faults(
    rt: Any, scope: str, directory: Path, faults: list[str], tag: str
) -> dict[int, Any]:
    """The batch: the faulty calls first, then patient ones up to 20; results by index."""
    patient = [f"p{i}" for i in range(20 - len(faults))]
    calls = [ToolCall(f"f-{k}", f"iso_{k}_{tag}", "{}") for k in faults]
    calls += [ToolCall(f"c-{k}", f"iso_patient_{tag}", {"key": k}) for k in patient]
    seen: dict[int, Any] = {}
    stream = rt.executor(scope).stream_batch(_batch(calls, scope))
    go = asyncio.ensure_future(_go_when_started(directory, patient))
    try:
        async with asyncio.timeout(WAIT_S):
            async for index, item in stream:
                seen[index] = item.result
                if len(seen) == len(faults):  # every fault settled: let the others finish
                    (directory / "open").touch()
    finally:
        (directory / "go").touch()
        (directory / "open").touch()
        await go
    return seen


async def _go_when_started(directory: Path, patient: list[str]) -> None:
    await _when_started(directory, patient)
    (directory / "go").touch()


async def _worker_of(rt: Any, scope: str, tag: str, isolation: str) -> set[int]:
    """The worker process(es) that ran a batch of 20 quick calls (pids of the actors)."""
    calls = [ToolCall(f"q{i}", f"iso_echo_{tag}", {"text": str(i)}) for i in range(20)]
    out = await asyncio.wait_for(rt.executor(scope).execute_batch(_batch(calls, scope)), WAIT_S)
    assert not [r for r in out.results if r.result.is_error], out.results
    import psutil

    pids = {r.result.value["pid"] for r in out.results}
    if isolation == "shared":
        return pids
    # call process → template → its keeper → worker
    return {psutil.Process(pid).parents()[2].pid for pid in pids}


async def test_four_faulty_bodies_fail_alone_and_their_sixteen_mates_succeed(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    placement = Placement(size=1, isolation="call")
    faults = ["exit", "segfault", "memory", "hang"]
    _register(rt, placement, tmp_path, faults)
    (worker,) = await _worker_of(rt, scope_key, "call", "call")
    before = rt.stats()
    seen = await _run_with_faults(rt, scope_key, tmp_path, faults, "call")
    assert sorted(seen) == list(range(20))
    failed = {i: r.error.info.code for i, r in seen.items() if r.is_error}
    assert failed == {0: "WORKER_LOST", 1: "WORKER_LOST", 2: "WORKER_LOST", 3: "TOOL_TIMEOUT"}
    assert "exited with status 3" in seen[0].error.message
    assert "killed by SIGSEGV" in seen[1].error.message
    assert "ran out of memory" in seen[2].error.message
    assert "the call's process was terminated" in seen[3].error.info.reason
    good = [seen[i].value for i in range(4, 20)]
    assert [v["key"] for v in good] == [f"p{i}" for i in range(16)]
    assert {v["worker"] for v in good} == {worker}  # call process → template → keeper → worker
    assert len({v["pid"] for v in good}) == 16  # each call alone in its own process
    assert await _worker_of(rt, scope_key, "call", "call") == {worker}  # no restart, no wait
    after = rt.stats()
    assert after.replacements == before.replacements  # no worker actor was replaced
    assert after.child_deaths - before.child_deaths == 3
    assert after.child_kills - before.child_kills == 1


async def test_shared_one_crash_fails_every_call_of_its_worker(
    shared_rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt = shared_rt
    placement = Placement(size=1, isolation="shared")
    faults = ["exit", "segfault", "hang"]  # no allocation here: nothing would limit it
    _register(rt, placement, tmp_path, faults)
    (worker,) = await _worker_of(rt, scope_key, "shared", "shared")
    seen = await _run_with_faults(rt, scope_key, tmp_path, faults, "shared")
    assert sorted(seen) == list(range(20))
    codes = {r.error.info.code for r in seen.values() if r.is_error}
    assert codes == {"WORKER_LOST"}
    assert all(r.is_error for r in seen.values())  # the blast radius: the whole worker
    (replacement,) = await _worker_of(rt, scope_key, "shared", "shared")
    assert replacement != worker
