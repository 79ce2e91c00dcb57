"""The cancellation ladder run by the worker itself (``isolation="call"``), without Ray.

With per-call isolation the executor sends one abort that carries the ladder
(``AbortOrder.interrupt_after`` / ``kill_after``); the worker forwards the abort to the
call's process, interrupts it, and kills it when the grace has passed, unless the call
ended first. A kill that overtakes its call (the call not yet on the worker) means the
call never starts. Real call processes, real kills; nothing survives a test.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.actors._blobs import tool_blob
from tests.actors._call_worker import call_worker
from toolray_actors._wire import AbortOrder, WorkerRequest

WAIT_S = 60.0


def _deaf(args: Any, ctx: Any) -> Any:
    Path(args["marker"]).touch()
    time.sleep(60)  # one C-level sleep: neither its signal nor an injection stops it


def _cooperative(args: Any, ctx: Any) -> Any:
    Path(args["marker"]).touch()
    ctx.signal.wait_sync(60)
    return f"stopped: {ctx.signal.reason}"


def _pid(args: Any, ctx: Any) -> Any:
    return os.getpid()


def _ident(token: str) -> dict[str, Any]:
    return {"call_id": token, "name": "t", "token": token, "max_result_bytes": None}


async def _until(ready: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not ready():
        assert time.monotonic() < deadline, "never became ready"
        await asyncio.sleep(0.005)


def _request(token: str, body: Any, args: dict[str, Any]) -> WorkerRequest:
    return WorkerRequest(token, f"k-{body.__name__}", tool_blob(body), args, _ident(token))


async def test_one_abort_with_the_ladder_kills_a_deaf_call_process(tmp_path: Path) -> None:
    with call_worker() as worker:
        marker = tmp_path / "deaf"
        call = asyncio.ensure_future(worker.run(_request("t1", _deaf, {"marker": str(marker)})))
        await _until(marker.exists)  # its body runs in its process
        before = (await worker.status()).children
        # the only message: abort now, interrupt after 10 ms, kill after 50 ms
        assert await worker.abort("t1", "deadline", 0.01, 0.05) is True
        outcome = await asyncio.wait_for(call, WAIT_S)
        assert (outcome.status, outcome.detail) == ("killed", "killed on request")
        after = (await worker.status()).children
        assert after.kills - before.kills == 1
        fresh = await asyncio.wait_for(worker.run(_request("t2", _pid, {})), WAIT_S)
        assert fresh.status == "ok"  # a replacement took the next call


async def test_a_call_that_stops_at_its_abort_is_not_killed_by_the_ladder(tmp_path: Path) -> None:
    with call_worker() as worker:
        marker = tmp_path / "coop"
        args = {"marker": str(marker)}
        call = asyncio.ensure_future(worker.run(_request("t1", _cooperative, args)))
        await _until(marker.exists)
        kills = (await worker.status()).children.kills
        found = await worker.abort_many([AbortOrder("t1", "deadline", 0.05, 0.1)])
        assert found == 1
        outcome = await asyncio.wait_for(call, WAIT_S)
        assert (outcome.status, outcome.value) == ("ok", "stopped: deadline")
        assert worker._procs is not None
        assert worker._procs.kill("t1") is False  # what the ladder's last step will find
        later = await asyncio.wait_for(worker.run(_request("t2", _pid, {})), WAIT_S)
        assert later.status == "ok"  # the process that stopped cleanly takes the next call
        assert (await worker.status()).children.kills == kills


async def test_a_kill_that_overtakes_its_call_means_the_call_never_starts() -> None:
    with call_worker() as worker:
        assert await worker.kill_call("late") is False  # not here yet
        runs = (await worker.status()).children.runs
        outcome = await asyncio.wait_for(worker.run(_request("late", _pid, {})), WAIT_S)
        assert (outcome.status, outcome.detail) == ("killed", "killed before it started")
        status = await worker.status()
        assert status.children.runs == runs + 1
        assert status.children.kills == 0  # no process was started, so none was killed
