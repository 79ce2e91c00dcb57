"""Farm controls with call processes (``isolation="call"``, the default for CPU pools).

Without Ray: a worker's call process checks ``max_result_bytes`` itself (the oversized
value never reaches the worker), and a drained worker starts no call while it reports its
idle time. On Ray: an idempotent tool survives two deaths of its call processes (the
worker actor lives on), and a rate-limited tool on a fresh pool — its first calls load the
tool's code in the workers and their templates — stays within its limit from the start.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest

from tests.actors import _farm_tools
from tests.actors._blobs import tool_blob
from tests.actors._call_worker import call_worker
from tests.actors._farm_tools import attempts_of, dying_tool, stamped_tool, starts_of
from tests.core._farm_helpers import code_of, windows_ok
from toolray import (
    AbortController,
    LogStep,
    MemoryEventLog,
    Placement,
    RateLimit,
    ToolBatchInput,
    ToolCall,
)
from toolray.errors import ResultTooLargeError
from toolray.isolation import rebuild_error
from toolray_actors._placement import placement_key
from toolray_actors._wire import WorkerRequest
from toolray_actors.execution._worker import ToolWorker

cloudpickle.register_pickle_by_value(_farm_tools)

WAIT_S = 60.0


def _long_text(args: Any, ctx: Any) -> Any:
    return "x" * int(args["n"])


def _pid(args: Any, ctx: Any) -> Any:
    return os.getpid()


def _ident(limit: int | None) -> dict[str, Any]:
    return {"call_id": "c1", "name": "t", "token": "tok", "max_result_bytes": limit}


async def test_an_oversized_value_fails_in_its_call_process() -> None:
    with call_worker() as worker:
        await _oversized(worker)


async def _oversized(worker: ToolWorker) -> None:
    blob = tool_blob(_long_text)
    run = worker.run(WorkerRequest("t1", "k-long", blob, {"n": 5000}, _ident(1000)))
    over = await asyncio.wait_for(run, WAIT_S)
    assert over.status == "error"
    assert over.value is None  # the value stayed in its call process
    assert over.error is not None
    assert isinstance(rebuild_error(over.error), ResultTooLargeError)  # rebuilt by name
    assert over.error.code == "RESULT_TOO_LARGE"
    fine = await asyncio.wait_for(
        worker.run(WorkerRequest("t2", "k-long", None, {"n": 500}, _ident(1000))), 60
    )
    assert (fine.status, fine.value) == ("ok", "x" * 500)
    assert (await worker.status()).children.runs == 2  # both ran in call processes


async def test_a_drained_worker_starts_no_call_and_reports_its_idle_time() -> None:
    with call_worker() as worker:
        await _drained(worker)


async def _drained(worker: ToolWorker) -> None:
    first = await asyncio.wait_for(
        worker.run(WorkerRequest("t1", "k-pid", tool_blob(_pid), {}, _ident(None))), 60
    )
    assert first.status == "ok"
    assert first.value != os.getpid()  # it ran in a call process
    idle = (await worker.status()).idle_s
    assert idle > 0.0
    assert await worker.drain() == 0  # nothing running
    later = await worker.run(WorkerRequest("t2", "k-pid", None, {}, _ident(None)))
    assert later.status == "retired"  # its executor sends it elsewhere, unstarted
    status = await worker.status()
    assert status.children.runs == 1
    assert status.idle_s >= idle


# --------------------------------------------------------------------------- on Ray
@pytest.fixture
def folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as path:
        yield path


def _pool_of(rt: Any, placement: Placement) -> Any:
    name = placement_key(placement)
    return next(p for p in rt.stats().pools if p.name == name)


@pytest.mark.ray
@pytest.mark.timeout(300)
async def test_an_idempotent_tool_survives_two_deaths_of_its_call_processes(
    rt: Any, scope_key: str, folder: str
) -> None:
    placement = Placement(isolation="call", spare=0, size=1, max_concurrency=3)
    dying = dying_tool("farm_iso_dying", folder, 2, idempotent=True, placement=placement)
    rt.owned.append(rt.registry.register(dying))
    log = MemoryEventLog()
    out = await rt.executor(scope_key).execute_batch(
        ToolBatchInput(
            [ToolCall("c1", "farm_iso_dying", {"key": "k"})],
            AbortController().signal,
            scope=scope_key,
            log=LogStep(1, 1, log),
        )
    )
    assert out.results[0].result.value == "ok k"
    assert len(set(attempts_of(folder, "k"))) == 3  # three call processes, two died
    assert [e["code"] for e in log.events if e["type"] == "tool/retry"] == ["WORKER_LOST"] * 2
    pool = await asyncio.to_thread(_pool_of, rt, placement)
    assert pool.isolation == "call"
    assert pool.child_deaths == 2
    assert (pool.deaths, pool.kills) == (0, 0)  # the worker actor lived on


@pytest.mark.ray
@pytest.mark.timeout(300)
async def test_a_rate_limited_tool_on_a_fresh_call_pool_keeps_its_limit_from_the_start(
    rt: Any, scope_key: str, folder: str
) -> None:
    limit = RateLimit(8, burst=1)
    placement = Placement(isolation="call", spare=0, size=2, max_concurrency=4)
    stamped = stamped_tool("farm_iso_stamped", folder, limit, placement)
    rt.owned.append(rt.registry.register(stamped))
    calls = [ToolCall(f"c{i}", "farm_iso_stamped", {"i": i}) for i in range(16)]
    out = await rt.executor(scope_key).execute_batch(
        ToolBatchInput(calls, AbortController().signal, scope=scope_key, max_parallel_tool_calls=16)
    )
    assert [r.result.value for r in out.results] == list(range(16))
    starts = starts_of(folder, "farm_iso_stamped")
    assert len(starts) == 16
    assert windows_ok(starts, limit, slack=0.1)
    assert not [r for r in out.results if code_of(r.result)]
    pool = await asyncio.to_thread(_pool_of, rt, placement)
    assert pool.isolation == "call"
