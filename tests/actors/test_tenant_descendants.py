"""What a body starts dies with its call: a double-forked ``setsid`` daemon included.

A row of the tenant-boundaries red team, on the real runtime (``isolation="call"``): on
main, a body's daemon that left its process group outlived the call, adopted by the
call-process template and never killed. Now the call process is a child subreaper: the
daemon stays below it and is killed when its call ends — or, when the ladder kills the call
process first, by the template that adopts it. Each is counted (``child_descendants``).
The control in each test is the daemon alive, in a session of its own, while its call runs.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from toolray import (
    Placement,
    TimeoutPolicy,
    ToolBatchInput,
    ToolCall,
    ToolDefinition,
    ToolOutput,
    text_block,
)

pytestmark = pytest.mark.ray

WAIT_S = 30.0


def _render(args: Any, value: Any) -> list[Any]:
    return [text_block(json.dumps(value))]


def _start_daemon(pid_file: str) -> int:
    """Double-fork a ``setsid`` daemon that sleeps; its pid once it runs."""
    import os
    import time

    read_end, write_end = os.pipe()
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, str(os.getpid()).encode())
            while True:
                time.sleep(3600)
        os._exit(0)
    daemon = int(os.read(read_end, 64))
    os.waitpid(first, 0)  # the first child is gone: the daemon is all that is left below
    with open(pid_file, "w", encoding="utf-8") as out:
        out.write(str(daemon))
    return daemon


def _leaves_a_daemon(args: Any, ctx: Any) -> Any:
    import os

    daemon = _start_daemon(args["pid_file"])
    os.kill(daemon, 0)  # the control: it runs
    return {"daemon": daemon, "own_session": os.getsid(daemon) != os.getsid(0)}


def _leaves_a_daemon_and_hangs(args: Any, ctx: Any) -> Any:
    import time

    _start_daemon(args["pid_file"])
    time.sleep(60)  # one C-level sleep: the ladder kills its process at the deadline


def _leaves_a_daemon_and_stays(args: Any, ctx: Any) -> Any:
    import time

    _start_daemon(args["pid_file"])
    time.sleep(120)  # still running when its worker's pool manager is killed


def _tools(placement: Placement) -> list[ToolDefinition]:
    def tool(name: str, body: Any, timeout_ms: float | None = None) -> ToolDefinition:
        return ToolDefinition(
            name=name,
            description=name,
            parameters={"type": "object"},
            output=ToolOutput(schema={}, render=_render),
            execute=body,
            placement=placement,
            timeout_ms=timeout_ms,
        )

    return [
        tool("daemon", _leaves_a_daemon),
        tool("daemon_hangs", _leaves_a_daemon_and_hangs, timeout_ms=500),
        tool("daemon_stays", _leaves_a_daemon_and_stays),
    ]


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _descendants(rt: Any) -> int:
    return sum(pool.child_descendants for pool in rt.stats().pools)


@pytest.fixture
def daemons(rt: Any, scope_key: str) -> Any:
    scope = rt.registry.scope(scope_key)
    for tool in _tools(Placement(size=1, spare=0, max_concurrency=4)):
        rt.owned.append(scope.register(tool))
    rt.owned.append(TimeoutPolicy().install(scope))  # the deadline of "daemon_hangs"
    return rt.executor(scope_key)


def test_a_daemon_dies_when_its_call_ends(rt: Any, daemons: Any, tmp_path: Path) -> None:
    before = _descendants(rt)
    pid_file = tmp_path / "daemon.pid"
    call = ToolCall("c1", "daemon", {"pid_file": str(pid_file)})
    (result,) = daemons.execute_batch_sync(ToolBatchInput([call])).results
    assert result.result.value["own_session"] is True  # it left its caller's group
    daemon = result.result.value["daemon"]
    assert _gone(daemon)  # killed (and reaped) before the call's result left
    assert _descendants(rt) == before + 1


def test_a_daemon_dies_when_the_ladder_kills_its_call(
    rt: Any, daemons: Any, tmp_path: Path
) -> None:
    before = _descendants(rt)
    pid_file = tmp_path / "daemon.pid"
    call = ToolCall("c1", "daemon_hangs", {"pid_file": str(pid_file)})
    (result,) = daemons.execute_batch_sync(ToolBatchInput([call])).results
    assert result.result.error.info.code == "TOOL_TIMEOUT"
    daemon = int(pid_file.read_text())
    deadline = time.monotonic() + WAIT_S
    while not _gone(daemon):  # the template adopted it when its call process died
        assert time.monotonic() < deadline, f"the daemon {daemon} outlived its call"
        time.sleep(0.01)
    while _descendants(rt) < before + 1:  # the template's count reaches the stats
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert os.getpid() != daemon


async def test_a_daemon_dies_when_the_pool_manager_of_its_calls_worker_dies(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    """Ray ends a worker whose owner (its pool manager) died, and SIGKILLs the worker's
    direct children: the call-process template is not one (its keeper is), so it ends its
    calls and what they started — a daemon still below a running call included."""
    import asyncio
    import signal

    scope = rt.registry.scope(scope_key)
    for tool in _tools(Placement(size=1, spare=0, max_concurrency=5)):  # a pool of its own
        rt.owned.append(scope.register(tool))
    pid_file = tmp_path / "daemon.pid"
    call = ToolCall("c1", "daemon_stays", {"pid_file": str(pid_file)})
    batch = asyncio.ensure_future(rt.executor(scope_key).execute_batch(ToolBatchInput([call])))
    deadline = time.monotonic() + WAIT_S
    while not pid_file.exists() or not pid_file.read_text():  # the body has started it
        assert time.monotonic() < deadline, batch
        assert not batch.done(), batch
        await asyncio.sleep(0.01)
    daemon = int(pid_file.read_text())
    call_process = psutil.Process(daemon).ppid()  # the call process keeps it (a subreaper)
    manager = None
    while manager is None:  # a snapshot leaves out an actor too busy to answer: ask again
        stats = rt.stats()
        pool = next((p for p in stats.pools if call_process in p.child_pids), None)
        named = f"toolray:pool:{pool.name}" if pool is not None else None
        manager = next((a for a in stats.actors if a.name == named), None)
        assert manager is not None or time.monotonic() < deadline, stats.pools
    assert not _gone(daemon)  # the control: it runs, below its running call
    os.kill(manager.pid, signal.SIGKILL)
    (result,) = (await asyncio.wait_for(batch, WAIT_S)).results
    assert result.result.error.info.code == "WORKER_LOST"  # its worker went with its owner
    while not _gone(daemon):
        assert time.monotonic() < deadline + WAIT_S, f"the daemon {daemon} outlived its worker"
        await asyncio.sleep(0.01)
