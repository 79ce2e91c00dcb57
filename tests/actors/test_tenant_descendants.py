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
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, str(os.getpid()).encode())
            while True:
                time.sleep(3600)
        os._exit(0)
    daemon = int(os.read(read_end, 64))
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
