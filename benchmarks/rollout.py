"""Per-call isolation, measured side by side in one run: the rollout plans and no-op throughput.

Run: ``.venv/bin/python benchmarks/rollout.py [--quick] [--no-write]`` (about 8 min;
``--quick`` smaller plans and fewer repetitions). It starts one local Ray from
``configs/local.toml`` and writes ``benchmarks/RESULTS-rollout.md``:

1. no-op batch throughput — 1,000 concurrency-safe no-op calls in one batch (cap 1000),
   through toolray with ``isolation="call"`` (the default), with ``"shared"``, and raw Ray
   doing the same fan-out (``toolray_actors/bench/_rawray.py``), interleaved, median of N;
2. the rollout plan of ``toolray bench --rollout`` (24 trajectories) through toolray (call
   and shared) and the peer patterns (asyncio gather, a thread pool, raw Ray tasks);
3. the trainer's plan, ``toolray bench --rollout --trajectories 200`` (800 calls in
   flight), through toolray and the gather and thread-pool patterns.

Targets (``toolray_actors/bench/_rollout_targets.py``): toolray (call) loses no call, leaves
nothing running, every good call succeeds, each faulty call fails alone with its code,
turn p99 ≤ timeout + kill grace + 150 ms, calls/s ≥ 90 % of the plan's kill-first bound
(and, on the trainer's plan, ≥ the gather pattern's); no-op throughput ≥ 1.0× raw with
"call", ≥ 2× with "shared".
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

from toolray_actors import RayRuntime, RuntimeConfig, load_config
from toolray_actors.bench._rawray import GroupShape, bench_tool
from toolray_actors.bench._rollout_plan import BackendReport, RolloutPlan, table
from toolray_actors.bench._rollout_targets import targets
from toolray_actors.cli._bench import BenchOptions, bench_rows, machine
from toolray_actors.cli._rollout import BACKENDS, run_rollout

RESULTS = Path(__file__).with_name("RESULTS-rollout.md")
TRAINER_BACKENDS = ("toolray", "gather", "threadpool")
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
    out = [str(t) for t in targets(reports, plan)]
    for row in rows:
        need = 1.0 if row["isolation"] == "call" else 2.0
        met = "PASS" if row["ratio"] >= need else "FAIL"
        out.append(
            f"{met} no-op throughput ({row['isolation']}) ≥ {need:g}× raw: {row['ratio']:.2f}×"
        )
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
    trainer = RolloutPlan(trajectories=40 if args.quick else 200)
    reps = 3 if args.quick else 5
    load = [round(os.getloadavg()[0], 1)]
    started = time.perf_counter()
    cfg = load_config(args.config)
    owner = RayRuntime.start(cfg, address=cfg.address or "local")
    try:
        rows = asyncio.run(throughput(owner, reps))
        # the trainer's plan before the default one: raw Ray's force-cancelled tasks leave
        # worker processes restarting behind them, which the next run would pay for
        trained = asyncio.run(run_rollout(cfg, trainer, TRAINER_BACKENDS))
        reports = asyncio.run(run_rollout(cfg, plan, BACKENDS))
    finally:
        owner.shutdown()
    seconds = time.perf_counter() - started
    load.append(round(os.getloadavg()[0], 1))
    m = machine()
    checks = verdict(reports, plan, rows)
    trainer_checks = verdict(trained, trainer, [])
    trained = [dataclasses.replace(r, backend=f"{r.backend} (trainer)") for r in trained]
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

### Targets

{chr(10).join(f"- {c}" for c in checks)}

## The trainer's plan (`toolray bench --rollout --trajectories {trainer.trajectories}`)

{trainer.trajectories * trainer.calls_per_turn} calls in flight; waiting for capacity does not
count against a call's timeout_ms (only its body's run does), and "call" pools grow with
waiting calls up to their node-derived limit.

{table(trained, trainer)}

### Targets

{chr(10).join(f"- {c}" for c in trainer_checks)}
"""
    print(body)
    if not args.no_write:
        write(body)
        print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
