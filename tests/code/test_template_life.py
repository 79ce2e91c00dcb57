"""The runtime's template process and warm children over time: death, restart, expiry."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import psutil
import pytest

from tests.code._helpers import child_pids, run, warm_pids
from toolray.code import PythonRuntime
from toolray.errors import CodeRunFailedError
from toolray.testing import Gate


def _template_pid(runtime: PythonRuntime) -> int:
    pid = runtime._template.pid  # the runtime's own template (others' may be alive too)
    assert pid is not None
    return pid


async def test_a_run_whose_template_dies_fails_alone_and_the_next_run_restarts_it() -> None:
    before = child_pids()
    runtime = PythonRuntime()
    entered = Gate()

    async def hold(args):
        entered.open()
        await asyncio.Event().wait()

    try:
        (used,) = await warm_pids(runtime)
        task = asyncio.ensure_future(run(runtime, "await tools.hold()", {"hold": hold}))
        await entered.wait()
        os.kill(_template_pid(runtime), signal.SIGKILL)
        with pytest.raises(CodeRunFailedError, match=r"\(worker-exit\): python exited \(signal"):
            await task
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(used).wait(30)  # it died with its template
        with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie not reaped yet
            assert psutil.Process(used).status() == "zombie"
        out = await run(runtime, "'again'")
        assert out.result == "again"
    finally:
        runtime.close()
    assert child_pids() - before == set()


async def test_a_warm_child_that_waits_past_its_time_to_live_is_replaced() -> None:
    runtime = PythonRuntime(warm_ttl_s=0.5)
    try:
        (first,) = await warm_pids(runtime)
        psutil.Process(first).wait(30)  # it exits by itself once its time to live is over
        await runtime.wait_warm()
        assert runtime.statistics().spawned >= 2
        assert (await run(runtime, "6 * 7")).result == 42
    finally:
        runtime.close()


def test_close_stops_the_template_too() -> None:
    runtime = PythonRuntime()
    runtime.confinement()
    template = psutil.Process(_template_pid(runtime))
    runtime.close()
    assert not template.is_running() or template.status() == psutil.STATUS_ZOMBIE
    runtime.close()  # idempotent


def test_a_closed_runtime_can_still_report_its_confinement_and_keeps_no_process() -> None:
    before = child_pids()
    runtime = PythonRuntime()
    runtime.close()
    assert runtime.confinement().pid_namespace is True
    assert runtime._template.pid is None  # stopped again
    assert child_pids() - before == set()
