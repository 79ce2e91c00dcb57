"""Call processes without Ray: ``CallProcesses`` with real processes, real faults, real kills.

A worker's call processes are forked from a ``toolray.procs`` template; each call runs
alone in one. A crash, a segfault or an allocation past the memory limit ends that process
and fails that call only (``lost``, saying how); the ladder's kill ends it as ``killed``; a
process left unclean (interrupted, a thread or a task left behind) is not reused; nested
dispatch goes through the injected transport. Every test leaves no process behind.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.actors._blobs import tool_blob
from toolray import AbortError, ToolExecutionSuccess
from toolray.isolation import (
    AbortCall,
    CallDone,
    CallOutcome,
    FrameReader,
    NestedAnswer,
    NestedRequest,
    ProtocolError,
    RunCall,
    encode,
    error_data,
    rebuild_error,
)
from toolray_actors.execution._children import CallProcesses

WAIT_S = 30.0
IDENT = {"call_id": "c1", "name": "t", "root_call_id": "c1", "scope": None, "token": "tok-1"}


async def _pid(args: Any, ctx: Any) -> Any:
    return os.getpid()


def _crash(args: Any, ctx: Any) -> Any:
    os._exit(5)


def _segfault(args: Any, ctx: Any) -> Any:
    return ctypes.string_at(0)


def _allocate(args: Any, ctx: Any) -> Any:
    return len(bytearray(64 * 2**30))


def _deaf(args: Any, ctx: Any) -> Any:
    Path(args["marker"]).touch()
    time.sleep(30)  # one C-level sleep: neither its signal nor an injection stops it


def _returns_on_go(args: Any, ctx: Any) -> Any:
    Path(args["marker"]).touch()
    go, deadline = Path(args["go"]), time.monotonic() + 30
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    return "done"


def _cooperative(args: Any, ctx: Any) -> Any:
    ctx.signal.wait_sync(30)
    return f"stopped: {ctx.signal.reason}"


def _cooperative_or_quick(args: Any, ctx: Any) -> Any:
    if args.get("quick"):
        return "quick"
    ctx.signal.wait_sync(30)
    return f"stopped: {ctx.signal.reason}"


def _spinning(args: Any, ctx: Any) -> Any:
    Path(args["marker"]).touch()
    end = time.monotonic() + 30
    while time.monotonic() < end:  # pure Python: an injected exception reaches it
        pass
    return "finished"


def _leaves_a_process(args: Any, ctx: Any) -> Any:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    return [os.getpid(), child.pid]


def _waits_for_its_process(args: Any, ctx: Any) -> Any:
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return os.getpid()


def _leaves_a_thread(args: Any, ctx: Any) -> Any:
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    return os.getpid()


async def _nests(args: Any, ctx: Any) -> Any:
    result = await ctx.dispatch("inner", {"n": 1})
    return result.value


def _nests_sync(args: Any, ctx: Any) -> Any:
    return ctx.dispatch_sync("inner", {"n": 2}).value


async def _nested(ident: Any, request: NestedRequest) -> NestedAnswer:
    value = {"for": ident["token"], "name": request.name}
    result = ToolExecutionSuccess(value=value, content=[{"type": "text", "text": "ok"}])
    return NestedAnswer(id=request.id, result=result)


class _Worker:
    """A fake worker: its call processes live on a loop thread of their own, as a worker's
    live on its actor loop; abort, interrupt and kill come from the test's thread, as a
    worker's come from its control lane."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.procs: CallProcesses = self.call(self._make()).result(WAIT_S)

    async def _make(self) -> CallProcesses:
        return CallProcesses(memory_mb=256, warm=1, limit=8, nested=_nested)

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def run(self, token: str, execute: Any, args: Any = None) -> CallOutcome:
        key = f"key-{execute.__name__}"
        done = self.call(self.procs.run(token, key, tool_blob(execute), args or {}, IDENT))
        outcome: CallOutcome = await asyncio.wait_for(asyncio.wrap_future(done), WAIT_S)
        return outcome

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.procs.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(WAIT_S)
        self.loop.close()


@pytest.fixture(scope="module")
def worker() -> Iterator[_Worker]:
    """One fake worker for the module (256 MB per call); nothing of it survives."""
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    made = _Worker()
    yield made
    made.close()
    deadline = time.monotonic() + WAIT_S
    while {p.pid for p in psutil.Process().children(recursive=True)} - before:
        assert time.monotonic() < deadline, "call processes outlived their worker"
        time.sleep(0.01)


async def _until(ready: Callable[[], bool]) -> None:
    """Wait (bounded) until ``ready()`` holds."""
    deadline = time.monotonic() + WAIT_S
    while not ready():
        assert time.monotonic() < deadline, "never became ready"
        await asyncio.sleep(0.005)


async def test_a_call_runs_in_a_process_of_its_own_which_takes_the_next_call(worker) -> None:
    await asyncio.wrap_future(worker.call(worker.procs.warm_up()))
    forks = worker.procs.stats().forks
    first = await worker.run("t1", _pid)
    second = await worker.run("t2", _pid)
    assert first.status == second.status == "ok"
    assert first.value == second.value != os.getpid()  # reused after a clean call
    assert worker.procs.stats().forks == forks


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        (_crash, "the call's process exited with status 5"),
        (_segfault, "the call's process was killed by SIGSEGV"),
        (_allocate, "the call's process ran out of memory (its limit is 256 MB)"),
    ],
)
async def test_a_process_that_dies_fails_its_own_call_only(worker, body: Any, detail: str) -> None:
    before = worker.procs.stats()
    mate = asyncio.ensure_future(worker.run("mate", _cooperative))
    # the mate is the worker's before the faulty call comes (an abort sent earlier would be
    # kept for it, and it would stop before the faulty one ended)
    await _until(lambda: worker.procs.stats().in_flight == before.in_flight + 1)
    lost = await worker.run("faulty", body)
    assert (lost.status, lost.detail) == ("lost", detail)
    assert not mate.done()  # the faulty call's death did not end it
    assert worker.procs.abort("mate", "done")
    assert (await mate).value == "stopped: done"  # its mate ran on, in its own process
    after = worker.procs.stats()
    assert (after.deaths - before.deaths, after.replacements - before.replacements) == (1, 1)


async def test_the_kill_ends_the_call_process_and_a_fresh_one_takes_over(
    worker, tmp_path: Path
) -> None:
    before = worker.procs.stats()
    marker = tmp_path / "deaf"
    call = asyncio.ensure_future(worker.run("deaf", _deaf, {"marker": str(marker)}))
    await _until(marker.exists)  # its body runs (not still waiting for a process)
    assert worker.procs.abort("deaf", "deadline")
    assert worker.procs.interrupt("deaf") == "forwarded"
    await _until(lambda: worker.procs.kill("deaf"))
    killed = await call
    assert killed.status == "killed"
    at_end = worker.procs.stats()  # counted by the time the call has its end
    assert (at_end.kills - before.kills, at_end.replacements - before.replacements) == (1, 1)
    assert (await worker.run("after", _pid)).status == "ok"
    after = worker.procs.stats()
    assert (after.kills - before.kills, after.replacements - before.replacements) == (1, 1)
    assert worker.procs.kill("deaf") is False  # settled: nothing to kill


def _kill_as_it_ends(procs: CallProcesses, token: str, go: Path) -> bool:
    """On the worker's loop, blocking it: let the body return, and once the call's end is in
    its socket (unread), kill the call — its end and its kill cross."""
    link = procs._orders._calls[token].proc
    assert link is not None
    go.touch()
    readable, _, _ = select.select([link._sock], [], [], WAIT_S)
    assert readable, "the call never ended"
    return procs.kill(token)


async def test_a_call_killed_as_it_ends_ends_killed_and_its_process_is_not_reused(
    worker, tmp_path: Path
) -> None:
    before = worker.procs.stats()
    marker, go = tmp_path / "running", tmp_path / "go"
    args = {"marker": str(marker), "go": str(go)}
    call = asyncio.ensure_future(worker.run("quick", _returns_on_go, args))
    await _until(marker.exists)  # its body runs in its process, waiting for the go
    killed: concurrent.futures.Future[bool] = concurrent.futures.Future()
    worker.loop.call_soon_threadsafe(  # on the worker's loop, which it blocks meanwhile
        lambda: killed.set_result(_kill_as_it_ends(worker.procs, "quick", go))
    )
    assert await asyncio.wrap_future(killed)
    ended = await call
    assert ended.status == "killed"  # the kill decided it, not the end that crossed it
    nexts = [await worker.run(f"next-{n}", _pid) for n in range(3)]
    assert [n.status for n in nexts] == ["ok"] * 3  # no call met the killed process
    after = worker.procs.stats()
    assert (after.kills - before.kills, after.deaths - before.deaths) == (1, 0)
    assert after.replacements - before.replacements == 1


async def test_an_interrupted_process_is_retired_not_reused(worker, tmp_path: Path) -> None:
    retired = worker.procs.stats().retired
    marker = tmp_path / "spinning"
    call = asyncio.ensure_future(worker.run("spin", _spinning, {"marker": str(marker)}))
    await _until(marker.exists)
    assert worker.procs.interrupt("spin") == "forwarded"
    interrupted = await call
    assert interrupted.status == "error"
    raised = rebuild_error(interrupted.error)
    assert isinstance(raised, AbortError)
    assert "interrupted the tool's thread" in raised.reason
    assert worker.procs.stats().retired == retired + 1  # that process was not clean any more


async def test_a_process_whose_body_left_a_thread_behind_is_not_reused(worker) -> None:
    retired = worker.procs.stats().retired
    left = await worker.run("t1", _leaves_a_thread)
    assert worker.procs.stats().retired > retired  # (another tool's may have made room)
    later = await worker.run("t2", _leaves_a_thread)  # the same tool: not that process
    assert later.value != left.value


async def test_a_process_whose_body_left_a_process_running_is_retired_with_it(worker) -> None:
    retired = worker.procs.stats().retired
    first = await worker.run("w1", _waits_for_its_process)  # one that ended: still clean
    assert (await worker.run("w2", _waits_for_its_process)).value == first.value
    left = await worker.run("l1", _leaves_a_process)
    call_pid, orphan = left.value
    later = await worker.run("l2", _leaves_a_process)  # the same tool: not that process
    assert later.value[0] != call_pid  # not reused
    assert worker.procs.stats().retired >= retired + 2
    deadline = time.monotonic() + WAIT_S
    while psutil.pid_exists(orphan) and psutil.Process(orphan).status() != "zombie":
        assert time.monotonic() < deadline, "what the body started outlived its process"
        await asyncio.sleep(0.01)  # the retirement's kill of the group lands (bounded)


def _never_runs(args: Any, ctx: Any) -> Any:
    raise AssertionError("an aborted call with no process waiting for it started")


async def test_an_abort_before_the_call_arrives_starts_it_aborted(worker) -> None:
    assert (await worker.run("warm", _cooperative_or_quick, {"quick": True})).value == "quick"
    assert worker.procs.abort("early", "too late") is False
    out = await worker.run("early", _cooperative_or_quick)  # its tool's idle process takes it
    assert out.value == "stopped: too late"


async def test_an_aborted_call_with_no_process_of_its_tool_idle_never_starts(worker) -> None:
    assert worker.procs.abort("cold", "too late") is False
    out = await worker.run("cold", _never_runs)
    assert out.status == "error"
    assert out.error is not None
    assert out.error.name == "AbortError"
    assert out.error.fields["reason"] == "the call was aborted before it reached its worker"


@pytest.mark.parametrize("body", [_nests, _nests_sync])
async def test_nested_dispatch_is_asked_of_the_worker_for_the_calls_token(worker, body) -> None:
    out = await worker.run("outer", body)
    assert out.status == "ok"
    assert out.value == {"for": "tok-1", "name": "inner"}


def _too_deep(args: Any, ctx: Any) -> Any:
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    return deep


async def test_a_value_that_cannot_leave_its_process_fails_its_call(worker) -> None:
    out = await worker.run("deep", _too_deep)
    assert out.status == "error"
    assert "the tool's result cannot be sent to another process" in out.error.message
    assert (await worker.run("next", _pid)).status == "ok"


async def test_an_unknown_definition_without_its_blob_is_missing(worker) -> None:
    done = worker.call(worker.procs.run("t1", "never-sent", None, {}, IDENT))
    assert (await asyncio.wrap_future(done)).status == "missing"


def test_records_cross_a_frame_unchanged() -> None:
    deep: Any = "leaf"
    for _ in range(200):
        deep = [deep]
    records = [
        RunCall(token="t", key="k", blob=b"\x00\n\xff", arguments={"a": "\ud800"}, ident=IDENT),
        AbortCall(token="t", reason=ValueError("why")),
        NestedAnswer(id=3, error=error_data(KeyError("k"))),
    ]
    reader = FrameReader("worker")  # what a call process reads: its worker's records
    data = b"".join(encode(r) for r in records)
    back = reader.feed(data[:7]) + reader.feed(data[7:])
    assert back[0] == records[0]
    assert (back[1].reason.args, type(back[1].reason)) == (("why",), ValueError)
    assert back[2].error.name == "KeyError"
    done = CallDone(token="t", outcome=CallOutcome(status="ok", value=deep), clean=True)
    (read,) = FrameReader("body").feed(encode(done))  # what a worker reads
    assert read == done
    with pytest.raises(ProtocolError, match='unknown frame op "abort"'):
        FrameReader("body").feed(encode(records[1]))  # a worker never unpickles a reason


# ---------------------------------------------------------------- sizing (pure)
def test_sizing_forks_for_long_calls_and_waits_while_short_ones_free_processes() -> None:
    from toolray_actors.execution._call_sizing import IDLE_S, STUCK_S, Sizing

    sizing = Sizing(warm=2, limit=10)
    sizing.released(100.0)
    assert (
        sizing.forks_wanted(100.001, waiting=5, live=2, forking=0, waiting_since=100.0) is None
    )  # unknown yet
    for _ in range(20):
        sizing.took(0.0002)  # short calls: a burst of them is CPU-bound
    assert sizing.forks_wanted(100.002, waiting=50, live=2, forking=0, waiting_since=100.0) is None
    assert (
        sizing.forks_wanted(100 + 2 * STUCK_S, waiting=50, live=2, forking=0, waiting_since=100)
        == 8
    )
    for _ in range(20):
        sizing.took(0.05)  # long calls hold their process: fork for the waiting ones
    assert sizing.forks_wanted(100.002, waiting=5, live=2, forking=1, waiting_since=100.0) == 4
    assert sizing.forks_wanted(100.002, waiting=0, live=2, forking=0, waiting_since=100.0) == 0
    assert (
        sizing.forks_wanted(100.002, waiting=5, live=0, forking=0, waiting_since=100.0) == 5
    )  # none alive
    sizing.released(50.0)  # long ago: calls that just began to wait are not stuck yet
    for _ in range(20):
        sizing.took(0.0002)
    assert sizing.forks_wanted(100.01, waiting=9, live=2, forking=0, waiting_since=100.0) is None
    assert sizing.trim(200.0, [200 - 3 * IDLE_S, 200 - 2 * IDLE_S, 199.0, 199.5]) == 2  # too long
    sizing.released(50.0)  # long ago: calls that just began to wait are not stuck yet
    for _ in range(20):
        sizing.took(0.0002)
    assert sizing.forks_wanted(100.01, waiting=9, live=2, forking=0, waiting_since=100.0) is None
    assert sizing.trim(200.0, [100.0, 101.0]) == 0  # the warm ones stay


# ---------------------------------------------------------------- which pools isolate
def test_cpu_pools_isolate_each_call_and_gpu_pools_share_one_call_at_a_time() -> None:
    from toolray import Placement
    from toolray_actors import RuntimeConfig
    from toolray_actors._placement import placement_key, pool_plan

    config = RuntimeConfig()
    assert config.pool.isolation == "call"
    default = pool_plan(None, config)
    assert (default.isolation, default.worker.max_bodies) == ("call", None)
    gpu = pool_plan(Placement(num_gpus=1), config)
    assert (gpu.isolation, gpu.max_concurrency, gpu.worker.max_bodies) == ("shared", 1, 1)
    chosen = pool_plan(Placement(num_gpus=1, isolation="call"), config)
    assert (chosen.isolation, chosen.worker.max_bodies) == ("call", None)
    busy_gpu = pool_plan(Placement(num_gpus=1, max_concurrency=4), config)
    assert (busy_gpu.isolation, busy_gpu.max_concurrency) == ("shared", 4)
    shared = RuntimeConfig.model_validate({"pool": {"isolation": "shared", "memory_mb": 256}})
    assert pool_plan(None, shared).isolation == "shared"
    assert pool_plan(Placement(isolation="call"), shared).worker.memory_mb == 256
    assert placement_key(Placement(isolation="call")) != placement_key(
        Placement(isolation="shared")
    )


def test_an_isolation_that_does_not_exist_is_refused() -> None:
    from pydantic import ValidationError

    from toolray import Placement
    from toolray_actors import RuntimeConfig

    with pytest.raises(ValueError, match=r'isolation must be "call", "shared" or "sandbox"'):
        Placement(isolation="process")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        RuntimeConfig.model_validate({"pool": {"isolation": "process"}})
    with pytest.raises(ValidationError):
        RuntimeConfig.model_validate({"pool": {"memory_mb": 0}})
