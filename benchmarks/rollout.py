"""Per-call isolation, measured side by side in one run: the rollout plan and no-op throughput.

Run: ``.venv/bin/python benchmarks/rollout.py [--quick] [--no-write]`` (about 5 min;
``--quick`` a smaller plan and fewer repetitions). It starts one local Ray from
``configs/local.toml`` and writes ``benchmarks/RESULTS-rollout.md``:

1. no-op batch throughput — 1,000 concurrency-safe no-op calls in one batch (cap 1000),
   through toolray with ``isolation="call"`` (the default), with ``"shared"``, and raw Ray
   doing the same fan-out (``toolray_actors/bench/_rawray.py``), interleaved, median of N;
2. the rollout plan of ``toolray bench --rollout`` through toolray (call and shared) and
   the peer patterns (asyncio gather, a thread pool, raw Ray tasks).

Targets: toolray (call) loses no call, leaves nothing running, every good call succeeds,
each faulty call fails alone with its code, turn p99 ≤ timeout + kill grace + 150 ms,
calls/s ≥ the gather pattern's; no-op throughput ≥ 1.0× raw with "call", ≥ 2× with "shared".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

from toolray_actors import RayRuntime, RuntimeConfig, load_config
from toolray_actors.bench._rawray import GroupShape, bench_tool
from toolray_actors.bench._rollout_plan import BackendReport, RolloutPlan, table
from toolray_actors.cli._bench import BenchOptions, bench_rows, machine
from toolray_actors.cli._rollout import BACKENDS, run_rollout

RESULTS = Path(__file__).with_name("RESULTS-rollout.md")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"


def _sibling(base: RayRuntime, isolation: str) -> RayRuntime:
    data = base.config.model_dump()
    data.update(namespace=f"{data['namespace']}-{isolation}", detached=False)
    data["pool"] = {**data["pool"], "isolation": isolation}
    return RayRuntime.start(RuntimeConfig.model_validate(data))


async def throughput(base: RayRuntime, reps: int) -> list[dict[str, Any]]:
    """1,000 no-op calls, cap 1000: toolray call / shared against raw Ray, interleaved."""
    rows = []
    safe = (GroupShape.parse("safe"),)
    for isolation in ("call", "shared"):
        rt = _sibling(base, isolation)
        try:
            rt.registry.register(bench_tool("noop"))
            opts = BenchOptions(calls=1000, shapes=safe, cap=1000, repetitions=reps)
            (row,) = await bench_rows(rt, opts)
        finally:
            rt.shutdown()
        rows.append({"isolation": isolation, **row})
    return rows


def _throughput_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| isolation | toolray calls/s | raw Ray calls/s | toolray / raw | target |",
        "|---|---:|---:|---:|---|",
    ]
    for row in rows:
        target = "≥ 1.0×" if row["isolation"] == "call" else "≥ 2×"
        lines.append(
            f"| {row['isolation']} | {row['toolray']['calls_per_s']:,.0f} "
            f"| {row['raw']['calls_per_s']:,.0f} | {row['ratio']:.2f}× | {target} |"
        )
    return "\n".join(lines)


def verdict(
    reports: list[BackendReport], plan: RolloutPlan, rows: list[dict[str, Any]]
) -> list[str]:
    """Each target of the run, met or not."""
    by = {r.backend: r for r in reports}
    out = []
    ours = by.get("toolray")
    if ours is not None:
        out.append(f"every good call succeeded: {ours.good_ok == ours.good}")
        out.append(
            "each faulty call failed alone with its code: "
            f"{sum(ours.faulty_failed.values()) == ours.faulty and not ours.good_failed}"
        )
        out.append(f"no call without a result: {ours.no_result == 0}")
        out.append(f"nothing left running: {ours.left_running == 0}")
        out.append(
            f"turn p99 {ours.turn_p99_ms:.0f} ms ≤ {plan.turn_p99_target_ms:g} ms: "
            f"{ours.turn_p99_ms <= plan.turn_p99_target_ms}"
        )
        if "gather" in by:
            bound = plan.bound_calls_per_s(plan.timeout_ms + plan.kill_grace_ms)
            out.append(
                f"calls/s {ours.calls_per_s:.0f} ≥ gather's {by['gather'].calls_per_s:.0f}: "
                f"{ours.calls_per_s >= by['gather'].calls_per_s} (no backend that kills a hung "
                f"call before answering it can pass {bound:.0f} on this plan; gather answers "
                f"at the deadline and leaves the thread running: its bound is "
                f"{plan.bound_calls_per_s(plan.timeout_ms):.0f})"
            )
    for row in rows:
        need = 1.0 if row["isolation"] == "call" else 2.0
        out.append(f"no-op throughput ({row['isolation']}) ≥ {need:g}× raw: {row['ratio'] >= need}")
    return out


def write(text: str) -> None:
    RESULTS.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller plan, fewer repetitions")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    parser.add_argument("--config", default=str(CONFIG), help="RuntimeConfig TOML")
    args = parser.parse_args()
    plan = RolloutPlan(trajectories=8, turns=3) if args.quick else RolloutPlan()
    reps = 3 if args.quick else 5
    load = [round(os.getloadavg()[0], 1)]
    started = time.perf_counter()
    cfg = load_config(args.config)
    owner = RayRuntime.start(cfg, address=cfg.address or "local")
    try:
        rows = asyncio.run(throughput(owner, reps))
        reports = asyncio.run(run_rollout(cfg, plan, BACKENDS))
    finally:
        owner.shutdown()
    seconds = time.perf_counter() - started
    load.append(round(os.getloadavg()[0], 1))
    m = machine()
    checks = verdict(reports, plan, rows)
    body = f"""# Per-call isolation: the rollout plan and no-op throughput

`benchmarks/rollout.py`{" --quick" if args.quick else ""} — one run, {seconds:.0f} s in all, a
local Ray from `configs/local.toml` (2 worker actors + 1 spare per pool).
Machine: {m["platform"]}, nproc {m["nproc"]}, Python {m["python"]}, Ray {m["ray"]}.
Date: {time.strftime("%Y-%m-%d %H:%M")}; 1-minute load average {" → ".join(map(str, load))}
at the start and the end (other sessions shared the machine: figures are noisy).

## No-op batch throughput (1,000 calls, cap 1000, median of {reps})

{_throughput_table(rows)}

## The rollout plan (`toolray bench --rollout`)

{table(reports, plan)}

## Targets

{chr(10).join(f"- {c}" for c in checks)}
"""
    print(body)
    if not args.no_write:
        write(body)
        print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
