"""Run lifecycle: deadline, outer abort, host cancellation, limits, statistics, validation."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import psutil
import pytest

from tests.code._helpers import child_pids, run, warm_pids
from toolray import AbortController, AbortError
from toolray.code import CodeRuntime, PythonRuntime
from toolray.errors import ToolTimeoutError
from toolray.testing import Gate

MIB = 1024 * 1024


def _entered_binding() -> tuple[Gate, dict]:
    entered = Gate()

    async def started(args):
        entered.open()
        return None

    async def hold(args):
        entered.open()
        await asyncio.Event().wait()  # never returns; the run ends around it

    return entered, {"started": started, "hold": hold}


async def test_the_deadline_kills_the_program() -> None:
    short = PythonRuntime(timeout_s=0.3)
    try:
        used = await warm_pids(short)
        with pytest.raises(ToolTimeoutError) as caught:
            await run(short, "while True:\n    pass")
        assert (caught.value.code, caught.value.message) == (
            "TOOL_TIMEOUT",
            "code run timed out after 300ms",
        )
        assert used.isdisjoint(child_pids())
        assert short.statistics().timed_out == 1
    finally:
        short.close()


@pytest.mark.parametrize("program", ["await tools.hold()", "await tools.started()\nwhile 1: pass"])
async def test_an_outer_abort_kills_the_run_mid_way(runtime: PythonRuntime, program: str) -> None:
    used = await warm_pids(runtime)
    entered, bindings = _entered_binding()
    ctrl = AbortController()
    task = asyncio.ensure_future(run(runtime, program, bindings, ctrl.signal))
    await entered.wait()
    ctrl.abort("user pressed stop")
    with pytest.raises(AbortError) as caught:
        await task
    assert (caught.value.code, caught.value.message) == (
        "ABORTED",
        "code run aborted: user pressed stop",
    )
    assert used.isdisjoint(child_pids())
    assert (await run(runtime, "1")).result == 1


async def test_an_abort_reason_that_is_an_error_is_the_cause(runtime: PythonRuntime) -> None:
    entered, bindings = _entered_binding()
    ctrl = AbortController()
    task = asyncio.ensure_future(run(runtime, "await tools.hold()", bindings, ctrl.signal))
    await entered.wait()
    reason = AbortError("the turn was cancelled")
    ctrl.abort(reason)
    with pytest.raises(AbortError) as caught:
        await task
    assert caught.value.message == "code run aborted: the turn was cancelled"
    assert caught.value.__cause__ is reason


async def test_a_pre_aborted_signal_spawns_nothing() -> None:
    runtime = PythonRuntime(warm=0)
    with pytest.raises(AbortError, match="code run aborted: early"):
        await run(runtime, "1", signal=_aborted("early"))
    assert runtime.statistics().spawned == 0
    assert runtime.statistics().runs == 0


def _aborted(reason: str):
    ctrl = AbortController()
    ctrl.abort(reason)
    return ctrl.signal


async def test_cancelling_the_host_task_kills_and_reaps_the_child(runtime: PythonRuntime) -> None:
    used = await warm_pids(runtime)
    entered, bindings = _entered_binding()
    task = asyncio.ensure_future(run(runtime, "await tools.started()\nwhile 1: pass", bindings))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert used.isdisjoint(child_pids())  # not even a zombie
    assert runtime.statistics().in_flight == 0


_LIMIT_NAMES = {
    "AS": "Max address space",
    "CPU": "Max cpu time",
    "NPROC": "Max processes",
    "NOFILE": "Max open files",
    "CORE": "Max core file size",
}


def _limits(pid: int) -> dict[str, tuple[int, int]]:
    """A process's limits, ``(soft, hard)`` (``-1``: unlimited), from ``/proc/<pid>/limits``."""
    found = {}
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        for name, label in _LIMIT_NAMES.items():
            if line.startswith(label):
                soft, hard = line[len(label) :].split()[:2]
                found[name] = tuple(-1 if v == "unlimited" else int(v) for v in (soft, hard))
    return found  # type: ignore[return-value]


async def test_limits_environment_and_directory_of_a_running_child() -> None:
    runtime = PythonRuntime(memory_mb=300, cpu_s=5)
    seen = {}
    try:
        (pid,) = await warm_pids(runtime)

        async def inspect(args):
            proc = psutil.Process(pid)
            seen["cwd"] = proc.cwd()
            seen["env"] = proc.environ()
            seen["limits"] = _limits(pid)  # read as text: prlimit() on another user's
            # process needs CAP_SYS_RESOURCE, which a root host may lack
            return None

        await run(runtime, "await tools.inspect()", {"inspect": inspect})
    finally:
        runtime.close()
    assert seen["limits"]["AS"] == (300 * MIB, 300 * MIB)
    soft, hard = seen["limits"]["CPU"]
    assert 5 <= soft <= 7
    assert hard == soft + 1
    assert seen["limits"]["NPROC"] == (64, 64)  # its threads (new processes: seccomp)
    assert seen["limits"]["CORE"] == (0, 0)
    assert seen["limits"]["NOFILE"][0] <= 32
    assert os.path.basename(seen["cwd"]).startswith("toolray-code-")
    assert os.path.dirname(seen["cwd"]) == tempfile.gettempdir()
    assert not os.path.exists(seen["cwd"])  # removed with the child
    assert seen["env"]["HOME"] == seen["cwd"]
    assert set(seen["env"]) == {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL"}


async def test_statistics_count_each_ending(runtime: PythonRuntime) -> None:
    await run(runtime, "1")
    with pytest.raises(Exception, match="code run failed"):
        await run(runtime, "1/0")
    stats = runtime.statistics()
    assert (stats.runs, stats.succeeded, stats.failed, stats.in_flight) == (2, 1, 1, 0)
    assert stats.spawned >= 2
    assert stats.warm <= 1


def test_a_runtime_serves_several_event_loops() -> None:
    # Warm children are plain processes, not tied to the loop that spawned them.
    runtime = PythonRuntime()
    try:
        asyncio.run(runtime.wait_warm())
        assert asyncio.run(run(runtime, "'first'")).result == "first"
        assert asyncio.run(run(runtime, "'second'")).result == "second"
    finally:
        runtime.close()


async def test_a_closed_runtime_still_runs_with_cold_children() -> None:
    runtime = PythonRuntime()
    runtime.close()
    assert (await run(runtime, "2 + 2")).result == 4
    assert runtime.statistics().warm == 0


def test_it_is_a_code_runtime() -> None:
    runtime = PythonRuntime(warm=0)
    assert isinstance(runtime, CodeRuntime)
    assert runtime.language == "python"


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"timeout_s": 0}, ValueError),
        ({"timeout_s": float("inf")}, ValueError),
        ({"timeout_s": "1"}, TypeError),
        ({"cpu_s": -1}, ValueError),
        ({"memory_mb": 8}, ValueError),
        ({"memory_mb": 1.5}, ValueError),
        ({"warm": -1}, ValueError),
        ({"python": ""}, ValueError),
        ({"allowed_imports": ["os.path"]}, ValueError),
    ],
)
def test_bad_configuration_is_rejected(kwargs: dict, error: type[Exception]) -> None:
    with pytest.raises(error):
        PythonRuntime(**kwargs)


async def test_misuse_of_run_raises_type_errors() -> None:
    runtime = PythonRuntime(warm=0)
    with pytest.raises(TypeError, match="program must be a string"):
        await run(runtime, b"1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a callable"):
        await run(runtime, "1", {"x": 3})
    assert runtime.statistics().spawned == 0


async def test_a_missing_interpreter_fails_as_worker_exit() -> None:
    runtime = PythonRuntime(python="/nonexistent/python", warm=0)
    with pytest.raises(Exception, match=r"code run failed \(worker-exit\): python spawn error"):
        await run(runtime, "1")


async def test_an_interpreter_that_dies_at_once_fails_as_worker_exit() -> None:
    runtime = PythonRuntime(python="/bin/false", warm=0)
    with pytest.raises(
        Exception, match=r"code run failed \(worker-exit\): python exited \(code 1\)"
    ):
        await run(runtime, "1")


async def test_an_interpreter_that_never_starts_the_program_times_out(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import toolray.code._session as session

    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    monkeypatch.setattr(session, "BOOT_TIMEOUT_S", 0.3)
    before = {proc.pid for proc in psutil.Process().children(recursive=True)}
    runtime = PythonRuntime(python=str(hang), warm=0)
    with pytest.raises(Exception, match=r"did not start the program within 0\.3s"):
        await run(runtime, "1")
    after = {proc.pid for proc in psutil.Process().children(recursive=True)}
    assert after <= before  # the hung "interpreter" was killed and reaped
