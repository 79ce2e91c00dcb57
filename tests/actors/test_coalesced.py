"""Coalesced dispatch on real worker actors: one message per worker per tick,
while timeouts, interrupts, kills and ``WORKER_LOST`` stay per call.

The session pool has 2 workers and the least-loaded pick alternates, so calls 0 and 2 of a
batch started in one tick share a worker and a message; each test checks that from the
batch trace (which worker ran each call) and the executor's message counter.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.actors._variants import variant_runtime
from tests.tools import deaf_async_tool, gate_tool, stubborn_tool, text_echo_tool
from toolray import AbortController, TimeoutPolicy, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

WAIT_S = 30.0


@pytest.fixture(scope="module")
def patient(ray_runtime: Any) -> Iterator[Any]:
    """A namespace whose kill step is out of reach (``kill_grace_ms`` 60 s): an interrupt that
    a loaded machine delivers late still never turns into a kill that would take the mates."""
    yield from variant_runtime(ray_runtime, "patient", kill_grace_ms=60_000)


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope, max_parallel_tool_calls=8)


def _workers(ex: Any) -> dict[int, str]:
    return {s["index"]: s.get("worker") for s in ex.last_trace if s.get("type") == "call"}


def _open(directory: Path, *keys: str) -> None:
    for key in keys:
        (directory / f"{key}.open").touch()


async def test_the_calls_of_one_tick_share_one_message_per_worker(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("co_echo")))
    ex = rt.executor(scope_key)
    before = await ex.statistics()
    calls = [ToolCall(f"c{i}", "co_echo", f'{{"text": "t{i}"}}') for i in range(8)]
    out = await ex.execute_batch(_batch(calls, scope_key))
    assert [r.result.value["text"] for r in out.results] == [f"t{i}" for i in range(8)]
    after = await ex.statistics()
    assert after.calls - before.calls == 8
    assert after.messages - before.messages <= 2  # one message per worker, not per call
    assert len(set(_workers(ex).values())) == 2


@pytest.mark.parametrize("kind", ["thread", "task"])
async def test_an_interrupted_call_leaves_its_message_mates_running_to_their_results(
    patient: Any, scope_key: str, tmp_path: Path, kind: str
) -> None:
    rt = patient
    name = f"co_deaf_{kind}"
    deaf = (
        stubborn_tool(name, "sleep_loop", timeout_ms=200)
        if kind == "thread"
        else deaf_async_tool(name, timeout_ms=200)
    )
    owned = [
        rt.registry.register(deaf),
        rt.registry.register(gate_tool(f"co_gate_{kind}", str(tmp_path))),
        TimeoutPolicy().install(rt.registry),
    ]
    try:
        ex = rt.executor(scope_key)
        before, kills = await ex.statistics(), rt.stats().kills
        calls = [ToolCall("c0", name, '{"seconds": 30}')] + [
            ToolCall(f"c{i}", f"co_gate_{kind}", f'{{"key": "g{i}"}}') for i in (1, 2, 3)
        ]
        seen = []
        async with asyncio.timeout(WAIT_S):
            async for index, item in ex.stream_batch(_batch(calls, scope_key)):
                seen.append((index, item.result))
                if index == 0:  # timed out and interrupted while its mates still run
                    _open(tmp_path, "g1", "g2", "g3")
        timed_out = seen[0][1]
        assert timed_out.error.info.code == "TOOL_TIMEOUT"
        mates = [r for _, r in seen[1:]]
        assert not any(r.is_error for r in mates), [r.to_wire() for r in mates]
        assert [r.value["key"] for r in mates] == ["g1", "g2", "g3"]
        workers = _workers(ex)
        assert workers[0] == workers[2]  # the interrupted call and a mate shared a worker…
        after = await ex.statistics()
        assert after.messages - before.messages <= 2  # …and a message
        assert after.interrupts - before.interrupts == 1
        assert rt.stats().kills == kills  # nobody was killed
    finally:
        _open(tmp_path, "g1", "g2", "g3")
        for dispose in reversed(owned):
            dispose()


KILL_SCENE = [
    ToolCall("c0", "co_quick", '{"text": "done before the kill"}'),  # worker A
    ToolCall("c1", "co_quick", '{"text": "other worker"}'),  # worker B
    ToolCall("c2", "co_block", '{"seconds": 30}'),  # worker A: killed at its deadline
    ToolCall("c3", "co_quick", '{"text": "other worker"}'),  # worker B
    ToolCall("c4", "co_held", '{"key": "held"}'),  # worker A: still running then
]
"""Two workers alternate: c2 is killed at its deadline while c4 still runs beside it."""


def _kill_scene(rt: Any, tmp_path: Path) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("co_quick")))
    rt.owned.append(rt.registry.register(stubborn_tool("co_block", "block", timeout_ms=1000)))
    rt.owned.append(rt.registry.register(gate_tool("co_held", str(tmp_path))))
    rt.owned.append(TimeoutPolicy().install(rt.registry))


async def test_shared_a_killed_worker_fails_only_the_calls_it_still_held(
    shared_rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt = shared_rt
    _kill_scene(rt, tmp_path)
    ex = rt.executor(scope_key)
    await ex.execute_batch(_batch([ToolCall("w", "co_quick", "{}")], scope_key))  # pool up
    before = await ex.statistics()
    try:
        out = await asyncio.wait_for(ex.execute_batch(_batch(KILL_SCENE, scope_key)), WAIT_S)
    finally:
        _open(tmp_path, "held")
    workers = _workers(ex)
    assert workers[0] == workers[2] == workers[4] != workers[1]
    assert (await ex.statistics()).messages - before.messages <= 2
    results = [r.result for r in out.results]
    assert results[0].value["text"] == "done before the kill"  # its outcome had arrived
    assert results[1].value["text"] == results[3].value["text"] == "other worker"
    assert results[2].error.info.code == "TOOL_TIMEOUT"
    assert "the worker was terminated" in results[2].error.info.reason
    assert results[4].error.info.code == "WORKER_LOST"  # a mate the kill took with it


async def test_a_killed_call_process_takes_no_mate_with_it(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    _kill_scene(rt, tmp_path)
    ex = rt.executor(scope_key)
    seen: dict[int, Any] = {}
    try:
        async with asyncio.timeout(WAIT_S):
            async for index, item in ex.stream_batch(_batch(KILL_SCENE, scope_key)):
                seen[index] = item.result
                if index == 2:  # killed while its mate c4 still runs on the same worker
                    assert 4 not in seen
                    _open(tmp_path, "held")
    finally:
        _open(tmp_path, "held")
    workers = _workers(ex)
    assert workers[0] == workers[2] == workers[4] != workers[1]
    assert seen[2].error.info.code == "TOOL_TIMEOUT"
    assert "the call's process was terminated" in seen[2].error.info.reason
    assert seen[4].value["key"] == "held"  # the mate ran on to its result
    assert [seen[i].value["text"] for i in (0, 1, 3)] == [
        "done before the kill",
        "other worker",
        "other worker",
    ]
