"""The peer patterns of ``toolray bench --rollout``: how agent frameworks run tools today.

- ``gather``: one process; every call ``asyncio.wait_for(asyncio.to_thread(tool, args),
  timeout)``, a turn's calls under ``asyncio.gather``, on a 64-thread default executor.
  A timed-out thread keeps running (and keeps its executor slot).
- ``threadpool``: the same with a 16-thread ``ThreadPoolExecutor`` shared by every
  trajectory (``loop.run_in_executor`` under ``asyncio.wait_for``).
- ``raw-ray``: each call a Ray task (``max_retries=0``, a fraction of a CPU each); a turn
  waits with ``ray.wait(refs, timeout=…)`` and force-cancels what is not ready (Ray kills
  that worker process).

A crash in an in-process pattern would end the process with every call in it; the
benchmark stands in a raised :class:`SimulatedCrash` and counts that call as without a
result. The in-process patterns run in a child process of the benchmark (``python -m
toolray_actors.bench._rollout_peers PATTERN PLAN-JSON``), which prints its report and exits
without waiting for its hung threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable
from typing import Any

from ._rollout_plan import (
    SETTLE_S,
    BackendReport,
    CallOutcomeRecord,
    PlannedCall,
    RolloutPlan,
    SimulatedCrash,
    report_of,
    rollout_body,
)

__all__ = ("IN_PROCESS", "run_in_process", "run_raw_ray")

IN_PROCESS = {"gather": 64, "threadpool": 16}
"""The in-process patterns and their thread counts."""

_NOTES = {
    "gather": "crashes simulated (a real one ends the process and every call in it); "
    "hung threads keep running and hold executor slots",
    "threadpool": "crashes simulated (a real one ends the process); hung threads hold "
    "pool slots, so later calls queue and time out",
}


# ---------------------------------------------------------------------- in one process
class _Bodies:
    """Counts the bodies running right now (what a hung thread leaves behind)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0

    def __call__(self, args: dict[str, Any]) -> str:
        with self.lock:
            self.running += 1
        try:
            return rollout_body(args)
        finally:
            with self.lock:
                self.running -= 1


async def _in_process(plan: RolloutPlan, pattern: str) -> BackendReport:
    loop = asyncio.get_running_loop()
    pool = concurrent.futures.ThreadPoolExecutor(IN_PROCESS[pattern])
    bodies = _Bodies()
    if pattern == "gather":
        loop.set_default_executor(pool)

    async def call(planned: PlannedCall) -> CallOutcomeRecord:
        args = {**planned.arguments(plan.hang_s), "simulate_crash": True}
        job: Awaitable[str] = (
            asyncio.to_thread(bodies, args)
            if pattern == "gather"
            else loop.run_in_executor(pool, bodies, args)
        )
        try:
            await asyncio.wait_for(job, plan.timeout_ms / 1000)
        except TimeoutError:
            return CallOutcomeRecord(kind=planned.kind, code="TIMEOUT")
        except SimulatedCrash:
            return CallOutcomeRecord(kind=planned.kind, code="NO_RESULT")
        except Exception:
            return CallOutcomeRecord(kind=planned.kind, code="ERROR")
        return CallOutcomeRecord(kind=planned.kind, code=None)

    records: list[CallOutcomeRecord] = []
    turn_s: list[float] = []

    async def trajectory(index: int) -> None:
        for turn in plan.turns_of(index):
            started = time.perf_counter()
            records.extend(await asyncio.gather(*(call(c) for c in turn)))
            turn_s.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(trajectory(t) for t in range(plan.trajectories)))
    wall = time.perf_counter() - started
    await asyncio.sleep(SETTLE_S)
    return report_of(
        pattern,
        records,
        turn_s,
        wall,
        left_running=bodies.running,
        threads_alive=threading.active_count() - 1,
        notes=_NOTES[pattern],
    )


def run_in_process(plan: RolloutPlan, pattern: str) -> BackendReport:
    """Run an in-process pattern in a child process of its own; its report."""
    done = subprocess.run(
        [sys.executable, "-m", __name__, pattern, json.dumps(dataclasses.asdict(plan))],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("REPORT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the {pattern} pattern failed: {done.stderr[-2000:]}")
    return BackendReport(**json.loads(lines[-1][len("REPORT ") :]))


def _main(argv: list[str]) -> None:
    plan = RolloutPlan(**json.loads(argv[1]))
    report = asyncio.run(_in_process(plan, argv[0]))
    print("REPORT " + json.dumps(dataclasses.asdict(report)), flush=True)
    os._exit(0)  # do not wait for the hung threads (they are what this pattern leaves)


# ---------------------------------------------------------------------- raw Ray tasks
def _rollout_task(args: dict[str, Any]) -> str:
    return rollout_body(args)


def _still_running() -> int:
    """Ray worker processes still executing the plan's task (their title names it)."""
    import psutil

    count = 0
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if cmdline and cmdline[0].startswith("ray::_rollout_task"):
            count += 1
    return count


async def run_raw_ray(plan: RolloutPlan, task_cpus: float) -> BackendReport:
    """Each call a Ray task; ``ray.wait`` with the timeout, then force-cancel the rest."""
    import ray

    task = ray.remote(num_cpus=task_cpus, max_retries=0)(_rollout_task)
    waits = concurrent.futures.ThreadPoolExecutor(plan.trajectories)
    loop = asyncio.get_running_loop()

    async def turn_of(calls: list[PlannedCall]) -> list[CallOutcomeRecord]:
        refs = [task.remote(c.arguments(plan.hang_s)) for c in calls]
        ready, _ = await loop.run_in_executor(
            waits, lambda: ray.wait(refs, num_returns=len(refs), timeout=plan.timeout_ms / 1000)
        )
        out = []
        for planned, ref in zip(calls, refs, strict=True):
            if ref not in ready:
                ray.cancel(ref, force=True)
                out.append(CallOutcomeRecord(kind=planned.kind, code="TIMEOUT"))
                continue
            try:
                await ref
            except Exception as err:
                out.append(CallOutcomeRecord(kind=planned.kind, code=type(err).__name__))
            else:
                out.append(CallOutcomeRecord(kind=planned.kind, code=None))
        return out

    records: list[CallOutcomeRecord] = []
    turn_s: list[float] = []

    async def trajectory(index: int, warm: bool) -> None:
        for turn in plan.turns_of(index):
            calls = [dataclasses.replace(c, kind="good") for c in turn] if warm else turn
            started = time.perf_counter()
            done = await turn_of(calls)
            if not warm:
                turn_s.append(time.perf_counter() - started)
                records.extend(done)
            if warm:
                return

    await asyncio.gather(*(trajectory(t, warm=True) for t in range(plan.trajectories)))
    started = time.perf_counter()
    await asyncio.gather(*(trajectory(t, warm=False) for t in range(plan.trajectories)))
    wall = time.perf_counter() - started
    waits.shutdown(wait=False)
    await asyncio.sleep(SETTLE_S)
    return report_of(
        "raw-ray",
        records,
        turn_s,
        wall,
        left_running=_still_running(),
        notes=f"tasks of {task_cpus:g} CPU each, max_retries=0; a force-cancel kills the "
        "task's worker process and Ray starts another",
    )


if __name__ == "__main__":
    _main(sys.argv[1:])
