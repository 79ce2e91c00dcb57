"""The executor's ledger: a one-call batch sent alone (no reservation) to an executor that
died is sent again only when the ledger proves it never started; a batch that started ends
``EXECUTOR_LOST`` and is never run twice. Units on real files, then real kills on Ray."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray

from tests.tools import journal_tool
from toolray import AbortController, ToolBatchInput, ToolCall
from toolray_actors._handles import read_ledger_on
from toolray_actors._ledger import (
    DRIVER,
    FirstCall,
    Ledger,
    highest,
    joined,
    ledger_dir,
    stamp_of,
    stamped,
    sweep,
)


def _driver() -> str:
    return uuid.uuid4().hex


def test_a_slot_holds_the_highest_ticket_started_and_reads_once_the_writer_is_gone() -> None:
    ledger = Ledger(f"unit-{uuid.uuid4().hex}")
    a, b = _driver(), _driver()
    assert ledger.join(a)
    assert ledger.join(b)
    assert ledger.join(a)  # idempotent
    ledger.started(a, 7)
    ledger.started(a, 5)  # an older ticket never lowers the slot
    ledger.started(b, 2)
    ledger.started(_driver(), 9)  # a driver without a slot writes nothing
    path = str(ledger.path)
    assert highest(path, a, 0.05) is None  # its writer holds the lock: not final yet
    ledger.close()
    assert highest(path, a, 0.05) == 7
    assert highest(path, b, 0.05) == 2
    assert highest(path, _driver(), 0.05) is None  # never joined: unknown, not "unstarted"
    os.unlink(path)
    with pytest.raises(FileNotFoundError):
        highest(path, a, 0.05)


def test_a_stamp_rides_after_a_pickle_and_reads_back() -> None:
    import pickle

    blob = pickle.dumps(("spec",), protocol=5)
    ticked = stamped(blob, DRIVER, 77)
    assert pickle.loads(ticked) == ("spec",)  # what follows a pickle's end is ignored
    assert stamp_of(ticked) == (DRIVER, 77)
    assert stamp_of(stamped(blob, "", 0)) is None


def test_joining_needs_a_32_character_id_and_says_where_the_slot_is() -> None:
    ledger = Ledger(f"unit-{uuid.uuid4().hex}")
    try:
        assert not ledger.join("short")
        assert not ledger.join("é" * 32)
        assert joined(ledger, "") is None
        assert joined(None, DRIVER) is None
        assert joined(ledger, DRIVER) == str(ledger.path)
    finally:
        ledger.close()
        os.unlink(ledger.path)


def test_sweep_removes_a_ledger_a_minute_after_it_first_finds_its_actor_gone() -> None:
    live = Ledger(f"unit-{uuid.uuid4().hex}")
    dead = Ledger(f"unit-{uuid.uuid4().hex}")
    dead.close()
    gone = dead.path.with_name(dead.path.name + ".gone")
    try:
        later = time.time() + 3600
        for ledger in (live, dead):  # written long ago: an idle actor's ledger
            os.utime(ledger.path, (later - 600, later - 600))
        sweep(now=later)
        assert dead.path.exists()  # first found gone now: a driver may still read it
        assert gone.exists()
        sweep(now=later + 30)
        assert dead.path.exists()
        sweep(now=later + 61)
        assert not dead.path.exists()
        assert not gone.exists()
        assert live.path.exists()  # its actor lives (the lock is held), however old
    finally:
        live.close()
        live.path.unlink(missing_ok=True)
        dead.path.unlink(missing_ok=True)
        gone.unlink(missing_ok=True)


def test_ledgers_live_in_a_private_directory() -> None:
    ledger = Ledger(f"unit-{uuid.uuid4().hex}")
    try:
        assert ledger.path.parent == ledger_dir()
        assert ledger_dir().stat().st_mode & 0o077 == 0
        assert ledger.path.stat().st_mode & 0o077 == 0
    finally:
        ledger.close()
        ledger.path.unlink()


def test_a_batch_marks_its_ledger_once_as_its_first_call_starts_then_defers_to_its_recorder() -> (
    None
):
    marks: list[str] = []

    class Recorder:
        def batch_started(self, batch: Any) -> str:
            return f"batch {batch}"

        def batch_ended(self, batch: Any, error: BaseException | None) -> None:
            marks.append(f"ended {batch}")

        def call_started(self, call: Any, parent: Any) -> str:
            marks.append(f"call {call} in {parent}")
            return f"span {call}"

        def call_ended(self, call: Any, end: Any) -> None:
            marks.append(f"done {call}")

    first = FirstCall(lambda: marks.append("ledger"), Recorder())
    handle = first.batch_started("b")
    assert marks == []  # a batch start has no effect yet
    assert first.call_started("c1", handle) == "span c1"
    first.call_started("c2", handle)
    first.now()
    first.call_ended("span c1", None)
    first.batch_ended(handle, None)
    assert marks == [
        "ledger",
        "call c1 in batch b",
        "call c2 in batch b",
        "done span c1",
        "ended batch b",
    ]
    assert not first.counts_only  # a span recorder watches each call's start
    bare = FirstCall(lambda: marks.append("bare"))
    assert bare.counts_only  # alone it does not keep a batch from being chained
    assert bare.batch_started("b") is None
    assert bare.call_started("c", None) is None
    bare.now()
    assert marks.count("bare") == 1


def _one(key: str, scope: str, **args: Any) -> ToolBatchInput:
    arguments = {"key": key, **args}
    return ToolBatchInput(
        [ToolCall(f"c-{key}", "ledger_journal", arguments)], AbortController().signal, scope=scope
    )


def _journaled(rt: Any, scope: str, directory: Path) -> Any:
    """``scope``'s executor handle, the journal tool (into ``directory``) registered."""
    rt.owned.append(rt.registry.register(journal_tool("ledger_journal", str(directory))))
    return rt.executor(scope)


def _outcome(result: Any) -> str:
    return "ok" if not result.is_error else str(result.error.info.code)


def _check_never_twice(outcomes: dict[str, str], directory: Path) -> None:
    """Each key ended ok or ``EXECUTOR_LOST``, no body ran twice, every ok body ran."""
    starts = _starts(directory)
    assert set(outcomes.values()) <= {"ok", "EXECUTOR_LOST"}
    assert len(starts) == len(set(starts))  # no body ran twice
    assert {k for k, o in outcomes.items() if o == "ok"} <= set(starts)


def _starts(directory: Path) -> list[str]:
    journal = directory / "journal"
    lines = journal.read_text().splitlines() if journal.exists() else []
    return [line.split()[1] for line in lines if line.startswith("start ")]


@pytest.mark.ray
async def test_the_pinned_reader_reads_a_ledger_on_its_node(rt: Any) -> None:
    ledger = Ledger(f"unit-{uuid.uuid4().hex}")
    ledger.join(DRIVER)
    ledger.started(DRIVER, 41)
    ledger.close()
    try:
        node = ray.get_runtime_context().get_node_id()
        assert await read_ledger_on(node, str(ledger.path), DRIVER, 1.0) == 41
    finally:
        ledger.path.unlink()


@pytest.mark.ray
async def test_one_call_batches_sent_after_a_kill_landed_run_once_on_a_new_executor(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    ex = _journaled(rt, scope_key, tmp_path)
    pids = [(await ex.statistics()).pid]
    keys = [f"k{n}" for n in range(4)]
    for key in keys:
        ray.kill(ray.get_actor(ex.name, namespace=rt.config.namespace), no_restart=True)
        await _until(lambda: not psutil.pid_exists(pids[-1]))  # ray.kill does not wait
        out = await ex.execute_batch(_one(key, scope_key))  # the handle still holds the dead one
        assert out.results[0].result.value == key, out.results[0].result
        pids.append((await ex.statistics()).pid)
    assert len(set(pids)) == len(pids)  # every batch ran on a new executor
    assert _starts(tmp_path) == keys  # each body ran exactly once


@pytest.mark.ray
async def test_one_call_batches_racing_a_kill_end_ok_or_executor_lost_and_never_run_twice(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    ex = _journaled(rt, scope_key, tmp_path)
    outcomes: dict[str, str] = {}
    for n in range(12):
        await ex.statistics()  # an executor to kill
        ray.kill(ray.get_actor(ex.name, namespace=rt.config.namespace), no_restart=True)
        key = f"r{n}"
        result = (await ex.execute_batch(_one(key, scope_key))).results[0].result
        outcomes[key] = _outcome(result)
    _check_never_twice(outcomes, tmp_path)


async def _until(predicate: Any, within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        await asyncio.sleep(0.02)


@pytest.mark.ray
async def test_a_one_call_batch_its_executor_started_ends_executor_lost_and_never_runs_twice(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    ex = _journaled(rt, scope_key, tmp_path)
    pid = (await ex.statistics()).pid
    task = asyncio.ensure_future(ex.execute_batch(_one("slow", scope_key, ms=1500)))
    await _until(lambda: _starts(tmp_path) == ["slow"])
    os.kill(pid, signal.SIGKILL)
    out = await asyncio.wait_for(task, timeout=60)
    assert out.results[0].result.error.info.code == "EXECUTOR_LOST"
    journal = tmp_path / "journal"
    await _until(lambda: "end slow" in journal.read_text())  # the body itself finished
    assert _starts(tmp_path) == ["slow"]


@pytest.mark.ray
async def test_without_its_ledger_a_batch_sent_to_a_dead_executor_is_not_sent_again(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    ex = _journaled(rt, scope_key, tmp_path)
    await ex.execute_batch(_one("first", scope_key))
    ready = ex._ready
    assert ready is not None
    assert ready.ledger is not None
    Path(ready.ledger.path).unlink()  # no proof left that the next batch never started
    os.kill((await ex.statistics()).pid, signal.SIGKILL)
    out = await ex.execute_batch(_one("second", scope_key))
    assert out.results[0].result.error.info.code == "EXECUTOR_LOST"
    again = await ex.execute_batch(_one("third", scope_key))  # the next one: a new actor
    assert again.results[0].result.value == "third"
    assert _starts(tmp_path) == ["first", "third"]


def _one_shard(rt: Any, count: int) -> list[str]:
    """``count`` fresh scope keys hosted by one shard."""
    run = uuid.uuid4().hex[:8]
    by_shard: dict[str, list[str]] = {}
    n = 0
    while True:
        key = f"ledger-{run}-{n}"
        n += 1
        keys = by_shard.setdefault(rt.executor(key).name, [])
        keys.append(key)
        if len(keys) == count:
            return keys


@pytest.fixture
def sharded(sharded_runtime: Any, tmp_path: Path) -> Iterator[Any]:
    """The sharded session runtime with the journal tool (writing into ``tmp_path``)."""
    dispose = sharded_runtime.registry.register(journal_tool("ledger_journal", str(tmp_path)))
    yield sharded_runtime
    dispose()


async def _group(rt: Any, keys: list[str], tag: str) -> list[Any]:
    """One one-call batch per scope, all sent in one tick (one message to their shard)."""
    batches = [_one(f"{tag}-{key}", key) for key in keys]
    outs = await asyncio.gather(
        *(rt.executor(key).execute_batch(b) for key, b in zip(keys, batches, strict=True))
    )
    return [out.results[0].result for out in outs]


@pytest.mark.ray
async def test_a_group_sent_to_a_sigkilled_shard_runs_once_on_a_new_one(
    sharded: Any, tmp_path: Path
) -> None:
    keys = _one_shard(sharded, 3)
    first = await _group(sharded, keys, "a")
    assert [r.value for r in first] == [f"a-{k}" for k in keys]
    pid = (await sharded.executor(keys[0]).statistics()).pid
    os.kill(pid, signal.SIGKILL)
    again = await _group(sharded, keys, "b")  # no await between: Ray may not know yet
    assert [r.value for r in again] == [f"b-{k}" for k in keys], again
    assert (await sharded.executor(keys[0]).statistics()).pid != pid
    expected = [f"a-{k}" for k in keys] + [f"b-{k}" for k in keys]
    assert sorted(_starts(tmp_path)) == sorted(expected)


@pytest.mark.ray
async def test_groups_racing_a_kill_end_ok_or_executor_lost_and_never_run_twice(
    sharded: Any, tmp_path: Path
) -> None:
    keys = _one_shard(sharded, 3)
    outcomes: dict[str, str] = {}
    for n in range(6):
        await sharded.executor(keys[0]).statistics()  # a shard to kill
        name = sharded.executor(keys[0]).name
        ray.kill(ray.get_actor(name, namespace=sharded.config.namespace), no_restart=True)
        results = await _group(sharded, keys, f"r{n}")
        for key, result in zip(keys, results, strict=True):
            outcomes[f"r{n}-{key}"] = _outcome(result)
    _check_never_twice(outcomes, tmp_path)
