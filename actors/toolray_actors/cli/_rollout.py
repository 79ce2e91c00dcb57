"""``toolray bench --rollout``: an RL rollout's tool calls, with faults, through toolray and peers.

The plan (``_rollout_plan``): N trajectories, each a scope of its own, run M turns of K
concurrency-safe calls each, all trajectories at once; 2–3 % of calls hang ignoring their
cancellation and 1 % crash their process. The same plan runs, one backend after the
other, through:

- ``toolray``: a sharded namespace with the default pools (isolation ``"call"``: each
  call in its own process), the tool's ``timeout_ms`` under ``TimeoutPolicy``, and a short
  ``kill_grace_ms`` (the rollout configuration: a hung call's process is killed that long
  after its deadline; nothing else is at stake in it);
- ``toolray-shared``: the same with ``isolation = "shared"`` (the blast radius: a crash or
  a kill takes every call of that worker);
- the peer patterns of ``_rollout_peers`` (``gather``, ``threadpool``, ``raw-ray``).

Each backend first runs untimed turns of good calls in every trajectory (a warm-up: the
processes a turn of the plan needs exist then; toolray's deadlines start after it). Reported
per backend: good calls that succeeded, faulty calls that failed (by code), calls without
a result, turn p50 / p99, calls/s over the whole plan, and what is still running after it;
then toolray's targets, each PASS or FAIL (``_rollout_targets``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolray_actors.bench._rollout_peers import IN_PROCESS, run_in_process, run_raw_ray
from toolray_actors.bench._rollout_plan import (
    SETTLE_S,
    BackendReport,
    CallOutcomeRecord,
    PlannedCall,
    RolloutPlan,
    report_of,
    rollout_tool,
    table,
)
from toolray_actors.bench._rollout_targets import targets, targets_text

if TYPE_CHECKING:
    from toolray_actors import RayRuntime

__all__ = ("BACKENDS", "add_arguments", "main_rollout", "rollout_runtime", "run_rollout")

BACKENDS = ("toolray", "toolray-shared", "gather", "threadpool", "raw-ray")
_TOOL = "rollout"  # rollout_tool's name


@contextlib.contextmanager
def rollout_runtime(base: Any, plan: RolloutPlan, isolation: str) -> Iterator[RayRuntime]:
    """A namespace for one toolray backend: sharded, default pools, the plan's kill grace."""
    from toolray_actors import RayRuntime, RuntimeConfig

    data = base.model_dump()
    data.update(
        namespace=f"{data['namespace']}-rollout-{isolation}",
        detached=False,
        kill_grace_ms=plan.kill_grace_ms,
        cancel_grace_ms=min(data["cancel_grace_ms"], plan.kill_grace_ms / 2),
        executors={"mode": "sharded", "shards": 2},
        pool={**data["pool"], "isolation": isolation},
    )
    rt = RayRuntime.start(RuntimeConfig.model_validate(data))
    try:
        yield rt
    finally:
        rt.shutdown()


def _code(result: Any) -> str | None:
    if not result.is_error:
        return None
    info = result.error.info
    return info.code if info is not None else "ERROR"


async def _toolray(rt: RayRuntime, plan: RolloutPlan, label: str) -> BackendReport:
    from toolray import AbortController, TimeoutPolicy, ToolBatchInput, ToolCall

    owned = [rt.registry.register(rollout_tool(plan))]
    records: list[CallOutcomeRecord] = []
    turn_s: list[float] = []
    faults: Counter[str] = Counter()

    async def turn_of(scope: str, calls: list[PlannedCall]) -> list[Any]:
        batch = ToolBatchInput(
            [ToolCall(c.call_id, _TOOL, c.arguments(plan.hang_s)) for c in calls],
            AbortController().signal,
            scope=scope,
        )
        done = await rt.executor(scope).execute_batch(batch)
        faults.update(done.faults)
        return list(done.results)

    async def trajectory(index: int, warm: bool) -> None:
        scope = f"traj-{index}"
        for turn in plan.turns_of(index):
            if warm:
                await turn_of(scope, [dataclasses.replace(c, kind="good") for c in turn])
                return
            started = time.perf_counter()
            results = await turn_of(scope, turn)
            turn_s.append(time.perf_counter() - started)
            records.extend(
                CallOutcomeRecord(kind=c.kind, code=_code(r.result))
                for c, r in zip(turn, results, strict=True)
            )

    try:
        for _ in range(2):  # before any deadline: the pools grow to the plan's concurrency
            await asyncio.gather(*(trajectory(t, warm=True) for t in range(plan.trajectories)))
        owned.append(TimeoutPolicy().install(rt.registry))
        faults.clear()
        started = time.perf_counter()
        await asyncio.gather(*(trajectory(t, warm=False) for t in range(plan.trajectories)))
        wall = time.perf_counter() - started
        await asyncio.sleep(SETTLE_S)  # a kill sent at the end of the run has landed
        stats = rt.stats()
    finally:
        for dispose in reversed(owned):
            dispose()
    busy = sum(p.children_busy for p in stats.pools) + stats.in_flight
    return report_of(
        label,
        records,
        turn_s,
        wall,
        left_running=busy,
        notes=f"sharded executors, default pools (isolation {rt.config.pool.isolation!r}), "
        f"kill_grace_ms {rt.config.kill_grace_ms:g}, cancel_grace_ms "
        f"{rt.config.cancel_grace_ms:g}; kills {stats.kills}, call processes killed "
        f"{stats.child_kills}, worker actors replaced {stats.replacements}; failures by fault "
        f"class: {', '.join(f'{n} {fault}' for fault, n in faults.items() if n) or 'none'}",
    )


async def run_rollout(
    base: Any, plan: RolloutPlan, backends: tuple[str, ...], task_cpus: float = 0.05
) -> list[BackendReport]:
    """Run the plan through each backend in turn (Ray must be up); one report each."""
    reports = []
    plan.turns_of(0)  # the plan is drawn before any backend's clock starts
    for backend in backends:
        if backend in ("toolray", "toolray-shared"):
            isolation = "call" if backend == "toolray" else "shared"
            with rollout_runtime(base, plan, isolation) as rt:
                reports.append(await _toolray(rt, plan, backend))
        elif backend in IN_PROCESS:
            reports.append(await asyncio.to_thread(run_in_process, plan, backend))
        else:
            reports.append(await run_raw_ray(plan, task_cpus))
    return reports


# ---------------------------------------------------------------------- command line
def _backends(text: str) -> tuple[str, ...]:
    chosen = tuple(b.strip() for b in text.split(",") if b.strip())
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown or not chosen:
        known = ", ".join(BACKENDS)
        raise argparse.ArgumentTypeError(
            f"unknown backend(s) {', '.join(unknown) or '(none)'}: choose from {known}"
        )
    return chosen


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolray bench --rollout``."""
    group = parser.add_argument_group("rollout (--rollout)")
    add = group.add_argument
    add("--rollout", action="store_true", help="run the rollout plan through toolray and peers")
    add("--trajectories", type=int, default=24, help="trajectories at once (default 24)")
    add("--turns", type=int, default=4, help="turns per trajectory (default 4)")
    add("--calls-per-turn", type=int, default=4, help="calls per turn (default 4)")
    add("--median-ms", type=float, default=50.0, help="median body time (default 50)")
    add("--hang-rate", type=float, default=0.03, help="share of hanging calls (default 0.03)")
    add("--crash-rate", type=float, default=0.01, help="share of crashing calls (default 0.01)")
    add("--timeout-ms", type=float, default=400.0, help="each call's timeout (default 400)")
    add(
        "--kill-grace-ms",
        type=float,
        default=50.0,
        help="grace before a hung call's process is killed (default 50)",
    )
    add("--seed", type=int, default=7, help="the plan's seed (default 7)")
    add(
        "--backends",
        type=_backends,
        default=BACKENDS,
        metavar="B[,…]",
        help=f"which to run (default {','.join(BACKENDS)})",
    )
    add("--task-cpus", type=float, default=0.05, help="raw-ray: CPUs per task (default 0.05)")


def _plan(args: argparse.Namespace) -> RolloutPlan:
    return RolloutPlan(
        trajectories=args.trajectories,
        turns=args.turns,
        calls_per_turn=args.calls_per_turn,
        median_ms=args.median_ms,
        hang_rate=args.hang_rate,
        crash_rate=args.crash_rate,
        timeout_ms=args.timeout_ms,
        kill_grace_ms=args.kill_grace_ms,
        seed=args.seed,
    )


def main_rollout(args: argparse.Namespace) -> int:
    """``toolray bench --rollout``: start Ray, run every backend, print the table."""
    from toolray_actors import RayRuntime
    from toolray_actors._config import load_config

    plan = _plan(args)
    plan.check()  # before Ray starts
    base = load_config(args.config)
    ray_owner = RayRuntime.start(
        base.model_copy(update={"namespace": f"{base.namespace}-rollout", "detached": False}),
        address=base.address or "local",
    )
    try:
        reports = asyncio.run(run_rollout(base, plan, args.backends, args.task_cpus))
    finally:
        ray_owner.shutdown()
    print(table(reports, plan))
    checks = targets_text(reports, plan)
    if checks:
        print("\n" + checks)
    if args.json is not None:
        out = {
            "plan": dataclasses.asdict(plan),
            "reports": [dataclasses.asdict(r) for r in reports],
            "targets": [dataclasses.asdict(t) for t in targets(reports, plan)],
        }
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
        print(f"wrote JSON: {args.json}", file=sys.stderr)
    return 0
