"""Sharded executors on the session cluster: many scopes per executor actor,
per-scope semantics unchanged.

``sharded_runtime`` is a second namespace of the session cluster with ``[executors] mode =
"sharded"`` and 2 shards. Scope keys are picked so that two of them land on one shard and
a third on the other (a scope's shard is a stable function of its key). Waits are on marker
files (a gate body says it started; the test opens it), never on elapsed time.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools import gate_tool, text_echo_tool
from toolray import AbortController, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

WAIT_S = 30.0


@pytest.fixture
def srt(sharded_runtime: Any) -> Iterator[Any]:
    """The sharded runtime; registrations made through ``srt.owned`` are lifted afterwards."""
    owned: list[Any] = []
    sharded_runtime.owned = owned
    yield sharded_runtime
    for dispose in reversed(owned):
        dispose()


def _keys(rt: Any) -> tuple[str, str, str]:
    """Two fresh scope keys on one shard and a third on the other shard."""
    run = uuid.uuid4().hex[:8]
    by_shard: dict[str, list[str]] = {}
    for i in itertools.count():
        key = f"shard-{run}-{i}"
        by_shard.setdefault(rt.executor(key).name, []).append(key)
        if len(by_shard) == 2 and max(len(v) for v in by_shard.values()) >= 2:
            pair = next(v for v in by_shard.values() if len(v) >= 2)
            other = next(v for v in by_shard.values() if v is not pair)
            return pair[0], pair[1], other[0]
    raise AssertionError("unreachable")


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope, max_parallel_tool_calls=4)


async def _started(directory: Path, *keys: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not all((directory / f"{k}.started").exists() for k in keys):
        assert time.monotonic() < deadline, f"never started: {keys}"
        await asyncio.sleep(0.005)


def _open(directory: Path, *keys: str) -> None:
    for key in keys:
        (directory / f"{key}.open").touch()


async def test_an_exclusive_call_in_one_scope_never_delays_another_scope_of_its_shard(
    srt: Any, tmp_path: Path
) -> None:
    srt.owned.append(srt.registry.register(gate_tool("sh_excl_gate", str(tmp_path), safe=False)))
    srt.owned.append(srt.registry.register(text_echo_tool("sh_excl_echo", safe=False)))
    a, b, _ = _keys(srt)
    ex_a, ex_b = srt.executor(a), srt.executor(b)
    assert ex_a.name == ex_b.name  # one shard hosts both scopes
    held = asyncio.ensure_future(
        ex_a.execute_batch(_batch([ToolCall("x", "sh_excl_gate", '{"key": "a"}')], a))
    )
    try:
        await _started(tmp_path, "a")  # scope a's exclusive barrier is running
        calls = [ToolCall(f"e{i}", "sh_excl_echo", f'{{"text": "b{i}"}}') for i in range(3)]
        out = await asyncio.wait_for(ex_b.execute_batch(_batch(calls, b)), WAIT_S)
        assert [r.result.value["text"] for r in out.results] == ["b0", "b1", "b2"]
        assert not held.done()  # scope b ran three barriers while scope a's still held
    finally:
        _open(tmp_path, "a")
    done = await asyncio.wait_for(held, WAIT_S)
    assert done.results[0].result.value["key"] == "a"
    assert (await ex_a.statistics()).pid == (await ex_b.statistics()).pid


async def test_a_sigkilled_shard_loses_only_its_scopes_uncommitted_calls_and_they_recover(
    srt: Any, tmp_path: Path
) -> None:
    srt.owned.append(srt.registry.register(gate_tool("sh_kill_gate", str(tmp_path))))
    srt.owned.append(srt.registry.register(text_echo_tool("sh_kill_echo")))
    a1, a2, b = _keys(srt)
    ex_a1, ex_a2, ex_b = srt.executor(a1), srt.executor(a2), srt.executor(b)
    seen: list[tuple[int, Any]] = []
    first = asyncio.Event()

    async def stream_a1() -> None:
        calls = [
            ToolCall("k1", "sh_kill_echo", '{"text": "committed"}'),
            ToolCall("k2", "sh_kill_gate", '{"key": "a1"}'),
        ]
        async for index, item in ex_a1.stream_batch(_batch(calls, a1)):
            seen.append((index, item.result))
            first.set()

    one = asyncio.ensure_future(stream_a1())
    two = asyncio.ensure_future(
        ex_a2.execute_batch(_batch([ToolCall("g", "sh_kill_gate", '{"key": "a2"}')], a2))
    )
    other = asyncio.ensure_future(
        ex_b.execute_batch(_batch([ToolCall("g", "sh_kill_gate", '{"key": "b"}')], b))
    )
    try:
        await _started(tmp_path, "a1", "a2", "b")
        await asyncio.wait_for(first.wait(), WAIT_S)  # k1 committed, streamed: then the kill
        pid_a, pid_b = (await ex_a1.statistics()).pid, (await ex_b.statistics()).pid
        assert pid_a != pid_b
        os.kill(pid_a, signal.SIGKILL)
        await asyncio.wait_for(one, WAIT_S)
        lost_two = await asyncio.wait_for(two, WAIT_S)
        assert not other.done()  # the other shard's scope is still running
    finally:
        _open(tmp_path, "b", "a1", "a2")
    assert seen[0][1].value["text"] == "committed"
    assert [i for i, _ in seen] == [0, 1]
    assert seen[1][1].error.info.code == "EXECUTOR_LOST"
    assert lost_two.results[0].result.error.info.code == "EXECUTOR_LOST"
    kept = await asyncio.wait_for(other, WAIT_S)
    assert kept.results[0].result.value["key"] == "b"
    assert (await ex_b.statistics()).pid == pid_b
    for key, ex in ((a1, ex_a1), (a2, ex_a2)):  # both scopes recover on their next call
        again = await ex.execute_batch(
            _batch([ToolCall("r", "sh_kill_echo", f'{{"text": "{key}"}}')], key)
        )
        assert again.results[0].result.value["text"] == key
    assert (await ex_a2.statistics()).pid not in (pid_a, pid_b)


async def test_disposing_a_scope_frees_its_state_in_the_shard_and_not_the_shard(
    srt: Any,
) -> None:
    a, b, _ = _keys(srt)
    scope = srt.scope(a)
    scope.register(text_echo_tool("sh_scoped_echo"))
    srt.owned.append(srt.registry.register(text_echo_tool("sh_global_echo")))
    ex_a, ex_b = srt.executor(a), srt.executor(b)
    call = [ToolCall("c", "sh_scoped_echo", '{"text": "mine"}')]
    out = await ex_a.execute_batch(_batch(call, a))
    assert out.results[0].result.value["text"] == "mine"
    await ex_b.execute_batch(_batch([ToolCall("c", "sh_global_echo", "{}")], b))
    before = await ex_a.statistics()
    scope.dispose()
    after = await ex_a.statistics()
    assert after.pid == before.pid  # the shard lives on
    assert after.scopes == before.scopes - 1  # only the disposed scope's state went
    assert a in {s.scope for s in before.scope_calls}
    assert a not in {s.scope for s in after.scope_calls}  # its call counts too
    assert srt.registry.info()["executors"].count(ex_a.name) == 1
    again = await ex_b.execute_batch(_batch([ToolCall("c", "sh_global_echo", "{}")], b))
    assert not again.results[0].result.is_error


async def test_stats_list_the_shards_as_executors_with_their_scope_counts(srt: Any) -> None:
    srt.owned.append(srt.registry.register(text_echo_tool("sh_stats_echo")))
    a1, a2, b = _keys(srt)
    for key in (a1, a2, b):
        await srt.executor(key).execute_batch(_batch([ToolCall("c", "sh_stats_echo", "{}")], key))
    stats = await asyncio.to_thread(srt.stats)
    shards = {srt.executor(a1).name, srt.executor(b).name}
    assert set(stats.executors) == shards  # no per-scope executor actor
    hosted = {a.name: a.scopes for a in stats.actors if a.kind == "executor"}
    assert set(hosted) == shards
    assert hosted[srt.executor(a1).name] >= 2
    assert hosted[srt.executor(b).name] >= 1


async def test_batches_of_many_scopes_sent_in_one_tick_share_one_message_per_shard(
    srt: Any,
) -> None:
    srt.owned.append(srt.registry.register(text_echo_tool("sh_group_echo")))
    keys = [f"group-{uuid.uuid4().hex[:8]}-{i}" for i in range(40)]
    shards = {srt.executor(key).name for key in keys}
    assert len(shards) == 2
    for key in keys:  # every shard already runs: the next batches go in one tick
        await srt.executor(key).execute_batch(_batch([ToolCall("w", "sh_group_echo", "{}")], key))
    submissions = srt._conn.submissions
    before = submissions.messages
    batches = [
        _batch(
            [ToolCall(f"c{n}", "sh_group_echo", f'{{"text": "{key}/{n}"}}') for n in range(3)], key
        )
        for key in keys
    ]
    outs = await asyncio.gather(*(srt.executor(b.scope).execute_batch(b) for b in batches))
    assert submissions.messages - before == len(shards)  # one group per shard
    for key, out in zip(keys, outs, strict=True):
        assert [r.result.value["text"] for r in out.results] == [f"{key}/{n}" for n in range(3)]


async def test_a_batch_cancelled_inside_a_group_aborts_alone(srt: Any, tmp_path: Path) -> None:
    srt.owned.append(srt.registry.register(gate_tool("sh_group_gate", str(tmp_path))))
    a, b, _ = _keys(srt)
    ex_a, ex_b = srt.executor(a), srt.executor(b)
    await asyncio.gather(ex_a.statistics(), ex_b.statistics())  # the shard runs
    before = srt._conn.submissions.messages
    doomed = asyncio.ensure_future(
        ex_a.execute_batch(_batch([ToolCall("g", "sh_group_gate", '{"key": "ga"}')], a))
    )
    kept = asyncio.ensure_future(
        ex_b.execute_batch(_batch([ToolCall("g", "sh_group_gate", '{"key": "gb"}')], b))
    )
    await _started(tmp_path, "ga", "gb")
    assert srt._conn.submissions.messages - before == 1  # the two batches went together
    doomed.cancel()
    try:
        await asyncio.wait({doomed}, timeout=WAIT_S)
        assert doomed.cancelled()
        assert not kept.done()
    finally:
        _open(tmp_path, "gb", "ga")
    out = await asyncio.wait_for(kept, WAIT_S)
    assert out.results[0].result.value["key"] == "gb"
