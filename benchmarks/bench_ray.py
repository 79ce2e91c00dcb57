"""Ray layer benchmark: the Ray figures, side by side with raw Ray, one run.

Run: ``.venv/bin/python benchmarks/bench_ray.py [--quick] [--scopes N] [--no-write]``
(about 2 min, most of it starting 100 executor actors; ``--quick`` about 1 min). It starts
its own local Ray from ``configs/local.toml`` (2 workers, ``kill_grace_ms = 300``), prints a
table of every figure with its target and whether it was met, and writes
``benchmarks/RESULTS-ray.md``.

Figures:

- (a) 1,000 no-op safe calls through ``execute_batch`` against raw Ray doing the same
  fan-out (one async driver actor awaiting as many bare calls on as many bare worker
  actors; ``toolray_actors.bench._rawray``): ratio of throughputs ≥ 0.7, at cap 1000 (the
  whole fan-out at once) and at the default cap 10;
- (b) 64 × 100 ms sleeping async bodies on 8 workers, cap 64: wall ≤ 1.3 × 100 ms;
- (c) abort → batch settled, cooperative bodies: p50 ≤ 20 ms over 15 aborts;
- (d) a body that ignores its signal (one long blocking sleep), ``timeout_ms=200`` under
  ``TimeoutPolicy``, ``kill_grace_ms=300``: settled ≤ 600 ms and what was killed replaced
  (the call's process; the worker when shared);
- (e) executor actor idle RSS, time to the first batch of a new scope, then N scopes
  (default 100, ``--quick`` 10) each running a small batch at once: wall and memory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from toolray import (
    AbortController,
    TimeoutPolicy,
    ToolBatchInput,
    ToolCall,
    ToolOutput,
    define_tool,
    text_block,
)
from toolray_actors import RayRuntime, load_config
from toolray_actors.bench._rawray import GroupShape, bench_tool
from toolray_actors.cli._bench import BenchOptions, bench_rows, machine

RESULTS = Path(__file__).with_name("RESULTS-ray.md")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"
_STRING = ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)])


# ---------------------------------------------------------------------- tools (by value)
async def _cooperative(args: Any, ctx: Any) -> str:
    try:
        await asyncio.wait_for(ctx.signal.wait(), timeout=30)
    except TimeoutError:
        return "finished"
    return "stopped"


def _stubborn(args: Any, ctx: Any) -> str:
    time.sleep(float(args.get("seconds", 30)))  # one C-level sleep: only a kill stops it
    return "ignored the signal"


COOPERATIVE = define_tool(
    name="bench_cooperative",
    description="waits for its signal",
    parameters={},
    output=_STRING,
    execute=_cooperative,
    is_concurrency_safe=lambda a: True,
)
STUBBORN = define_tool(
    name="bench_stubborn",
    description="ignores its signal",
    parameters={"seconds": {"type": "number"}},
    output=_STRING,
    execute=_stubborn,
    timeout_ms=200,
    is_concurrency_safe=lambda a: True,
)


# ---------------------------------------------------------------------- figures
@dataclass
class Figure:
    key: str
    what: str
    value: float | None
    unit: str
    target: str
    met: bool | None
    detail: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def _calls(name: str, n: int, args: str = "{}") -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, args) for i in range(n)]


def _batch(
    calls: list[ToolCall], signal: Any = None, cap: int | None = None, *, scope: str | None
) -> ToolBatchInput:
    return ToolBatchInput(
        calls,
        signal or AbortController().signal,
        max_parallel_tool_calls=cap or len(calls),
        scope=scope,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _lat(side: dict[str, Any]) -> str:
    if side["p50_ms"] is None:
        return "per-call latency n/a"
    return f"per-call p50 {side['p50_ms']:.1f} ms / p95 {side['p95_ms']:.1f} ms"


async def figure_a(rt: RayRuntime, reps: int) -> list[Figure]:
    figures = []
    safe = (GroupShape.parse("safe"),)
    for cap in (1000, 10):
        opts = BenchOptions(calls=1000, shapes=safe, cap=cap, repetitions=reps)
        (row,) = await bench_rows(rt, opts)
        ours, raw = row["toolray"], row["raw"]
        figures.append(
            Figure(
                f"a{'' if cap == 1000 else '-cap10'}",
                f"(a) 1,000 no-op safe calls, {row['workers']} workers, cap {cap}: "
                "toolray / raw Ray throughput",
                row["ratio"],
                "×",
                "≥ 0.7×",
                row["ratio"] >= 0.7,
                f"toolray {ours['calls_per_s']:,.0f} calls/s ({_lat(ours)}); "
                f"raw Ray {raw['calls_per_s']:,.0f} calls/s ({_lat(raw)}); "
                f"median of {reps}",
                row,
            )
        )
    return figures


async def figure_b(rt: RayRuntime, reps: int) -> Figure:
    opts = BenchOptions(
        calls=64, workers=(8,), body="sleep", sleep_ms=100, cap=64, repetitions=reps
    )
    (row,) = await bench_rows(rt, opts)
    wall = row["toolray"]["wall_ms_median"]
    return Figure(
        "b",
        "(b) 64 × 100 ms sleeping async bodies, 8 workers, cap 64: wall",
        wall,
        "ms",
        "≤ 130 ms",
        wall <= 130,
        f"best {min(row['toolray']['wall_ms']):.1f} ms; raw Ray, same work: "
        f"{row['raw']['wall_ms_median']:.1f} ms (toolray / raw "
        f"{wall / row['raw']['wall_ms_median']:.2f}×); median of {reps}",
        row,
    )


async def _wait_in_flight(ex: Any, n: int) -> None:
    deadline = time.monotonic() + 30
    while (await ex.statistics()).in_flight < n:
        if time.monotonic() > deadline:
            raise RuntimeError("the cooperative bodies never all started")
        await asyncio.sleep(0.005)


async def figure_c(rt: RayRuntime, reps: int, width: int = 8) -> Figure:
    ex = rt.executor("bench-abort")
    before = await ex.statistics()
    times: list[float] = []
    for rep in range(reps + 1):
        ctrl = AbortController()
        task = asyncio.ensure_future(
            ex.execute_batch(_batch(_calls(COOPERATIVE.name, width), ctrl.signal, scope=ex.scope))
        )
        await _wait_in_flight(ex, width)
        start = time.perf_counter()
        ctrl.abort("bench abort")
        result = await asyncio.wait_for(task, 30)
        elapsed = (time.perf_counter() - start) * 1000
        codes = {r.result.error.info.code for r in result.results if r.result.is_error}
        if codes != {"ABORTED"}:
            raise RuntimeError(f"abort figure: unexpected outcomes {codes}")
        if rep > 0:  # the first one warms the executor and the worker caches
            times.append(elapsed)
    after = await ex.statistics()
    p50 = statistics.median(times)
    return Figure(
        "c",
        f"(c) abort → batch settled, {width} cooperative bodies on 2 workers: p50",
        p50,
        "ms",
        "≤ 20 ms",
        p50 <= 20,
        f"p90 {_pct(times, 0.9):.1f} ms, max {max(times):.1f} ms over {reps}; "
        f"interrupts {after.interrupts - before.interrupts}, "
        f"kills {after.kills - before.kills}",
        {"ms": times},
    )


async def _wait_replaced(rt: RayRuntime, before: Any) -> bool:
    """Whether what the ladder killed was replaced (it may be just after the result): the
    call's process with ``isolation = "call"``, the worker with ``"shared"``."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        after = rt.stats()
        if after.child_replacements > before.child_replacements:
            return True
        if after.replacements > before.replacements and after.workers == before.workers:
            return True
        await asyncio.sleep(0.02)
    return False


async def figure_d(rt: RayRuntime, reps: int) -> Figure:
    ex = rt.executor("bench-stubborn")
    dispose = TimeoutPolicy().install(rt.registry)
    times: list[float] = []
    replaced: list[bool] = []
    try:
        await ex.execute_batch(_batch(_calls("bench_noop", 8), scope=ex.scope))  # warm the executor
        for _ in range(reps):
            before = rt.stats()
            start = time.perf_counter()
            result = await ex.execute_batch(
                _batch(_calls(STUBBORN.name, 1, '{"seconds": 30}'), scope=ex.scope)
            )
            times.append((time.perf_counter() - start) * 1000)
            failure = result.results[0].result
            if failure.error.info.code != "TOOL_TIMEOUT":
                raise RuntimeError(f"stubborn figure: got {failure.error.info.code}")
            replaced.append(await _wait_replaced(rt, before))
            await asyncio.sleep(1.0)  # let the background spare start (2 cores), not measured
    finally:
        dispose()
    worst = max(times)
    return Figure(
        "d",
        "(d) body ignoring its signal, timeout 200 ms + grace 300 ms: settled (worst)",
        worst,
        "ms",
        "≤ 600 ms, what was killed replaced",
        worst <= 600 and all(replaced),
        f"median {statistics.median(times):.0f} ms over {reps}; "
        f"replaced {sum(replaced)}/{reps}; reason: {failure.error.info.reason}",
        {"ms": times, "replaced": replaced},
    )


def _node_pids() -> set[int]:
    """This Ray node's processes (gcs, raylet, agents, every actor), not this driver.

    The bench starts its node locally, so they are all this driver's descendants.
    """
    try:
        return {child.pid for child in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def _memory(pids: set[int]) -> dict[str, float]:
    rss = uss = 0
    for pid in pids:
        try:
            info = psutil.Process(pid).memory_full_info()
        except psutil.Error:
            continue
        rss += info.rss
        uss += info.uss
    return {"processes": len(pids), "rss_mb": rss / 2**20, "uss_mb": uss / 2**20}


def _cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


async def figure_e(rt: RayRuntime, scopes: int) -> list[Figure]:
    small = _calls("bench_noop", 4)
    first = rt.executor("bench-mem-first")
    start = time.perf_counter()
    await first.execute_batch(_batch(small, scope=first.scope))
    first_ms = (time.perf_counter() - start) * 1000
    idle = await first.statistics()
    before = _memory(_node_pids())
    handles = [rt.executor(f"bench-scope-{i}") for i in range(scopes)]
    start = time.perf_counter()
    runs = (h.execute_batch(_batch(small, scope=h.scope)) for h in handles)
    results = await asyncio.gather(*runs)
    wall = time.perf_counter() - start
    ok = all(not r.result.is_error for res in results for r in res.results)
    stats = await asyncio.gather(*(h.statistics() for h in handles))
    executor_rss = sum(s.rss_bytes for s in stats) / 2**20
    after = _memory(_node_pids())
    pids = [s.pid for s in stats]
    cpu0, t0 = _cpu_seconds(pids), time.perf_counter()
    await asyncio.sleep(5.0)  # the idle executors' own CPU use over 5 s
    idle_cpu = (_cpu_seconds(pids) - cpu0) / (time.perf_counter() - t0)
    per_scope = (after["uss_mb"] - before["uss_mb"]) / scopes
    return [
        Figure(
            "e-idle",
            "(e) executor actor idle RSS (one scope, after its first batch)",
            idle.rss_bytes / 2**20,
            "MB",
            "reported",
            None,
        ),
        Figure(
            "e-first",
            "(e) first batch of a new scope (executor actor created, 4 no-op calls)",
            first_ms,
            "ms",
            "reported",
            None,
        ),
        Figure(
            "e-scopes",
            f"(e) {scopes} scopes, a 4-call batch each, all at once: wall",
            wall,
            "s",
            f"{scopes} scopes work",
            ok and len(results) == scopes,
            f"executor RSS total {executor_rss:,.0f} MB ({executor_rss / scopes:.0f} MB each); "
            f"Ray node {before['processes']}→{after['processes']} processes, "
            f"RSS {before['rss_mb']:,.0f}→{after['rss_mb']:,.0f} MB, "
            f"USS {before['uss_mb']:,.0f}→{after['uss_mb']:,.0f} MB "
            f"(+{per_scope:.0f} MB USS per scope); idle executors burn "
            f"{idle_cpu * 100:.0f}% of one core",
            {
                "wall_s": wall,
                "executor_rss_mb": executor_rss,
                "before": before,
                "after": after,
                "uss_mb_per_scope": per_scope,
                "idle_cpu_cores": idle_cpu,
            },
        ),
    ]


# ---------------------------------------------------------------------- the run
async def run_all(rt: RayRuntime, args: argparse.Namespace) -> list[Figure]:
    reps = 3 if args.quick else 5
    for tool in (bench_tool("noop"), bench_tool("sleep"), COOPERATIVE, STUBBORN):
        rt.registry.register(tool)
    figures: list[Figure] = []
    steps = [
        ("a", lambda: figure_a(rt, reps)),
        ("b", lambda: figure_b(rt, reps)),
        ("c", lambda: figure_c(rt, 15)),
        ("d", lambda: figure_d(rt, 3 if args.quick else 5)),
        ("e", lambda: figure_e(rt, args.scopes)),
    ]
    for name, step in steps:
        started = time.perf_counter()
        out = await step()
        figures.extend(out if isinstance(out, list) else [out])
        print(f"  ({name}) done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return figures


def _value(f: Figure) -> str:
    if f.value is None:
        return "—"
    return f"{f.value:.2f} {f.unit}" if f.unit == "×" else f"{f.value:,.1f} {f.unit}"


def table(figures: list[Figure]) -> str:
    lines = ["| figure | value | target | met | detail |", "|---|---:|---|:---:|---|"]
    for f in figures:
        met = "—" if f.met is None else ("yes" if f.met else "**NO**")
        lines.append(f"| {f.what} | {_value(f)} | {f.target} | {met} | {f.detail} |")
    return "\n".join(lines)


def _machine_line(m: dict[str, Any]) -> str:
    return f"{m['platform']}, nproc {m['nproc']}, Python {m['python']}, Ray {m['ray']}"


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 2)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def write_results(figures: list[Figure], m: dict[str, Any], args: Any, seconds: float) -> None:
    mode = f"--quick ({args.scopes} scopes)" if args.quick else f"full ({args.scopes} scopes)"
    data = "\n".join(
        f"{json.dumps(f.key)}: {json.dumps(_rounded(f.data), default=str)}"
        for f in figures
        if f.data
    )
    RESULTS.write_text(
        f"""# Ray layer benchmark

`benchmarks/bench_ray.py` — one run, mode {mode}, {seconds:.0f} s in all; a local Ray
started from `{Path(args.config).name}` (`configs/local.toml`: 2 worker actors + 1 spare,
`kill_grace_ms = 300`, `cancel_grace_ms = 50`).

Machine: {_machine_line(m)}
Date: {time.strftime("%Y-%m-%d %H:%M")}; 1-minute load average {m["load"]} at the start
and the end of the run (other sessions shared the machine: figures are noisy, about ±30 %).

{table(figures)}

How each figure is taken:
- Throughput is calls / median wall time of one batch seen from the driver process (an
  untimed warm-up first; toolray and raw Ray interleaved). Raw Ray is one async driver actor
  awaiting the same bare calls (same cap, least-loaded pick) on as many bare async worker
  actors (`toolray_actors/bench/_rawray.py`).
- Per-call latency runs from admission to settled: for toolray the batch trace's span
  (`started`, when the scheduler admits the call, before its pipeline, to `settled`), for raw
  Ray the driver actor's clock from submitting the call to its result. At cap 1000 toolray
  admits all 1,000 calls within ~20 ms and the executor's loop then submits them one by one,
  so its latencies approach the batch's wall time; raw Ray admits each call as it submits it.
- (b) measures from the driver; the raw row is the same 64 sleeps through the raw driver.
- (c) waits until `ExecutorHandle.statistics().in_flight` counts every body, then aborts
  and times until `execute_batch` returns.
- (d) uses a body blocked in one C-level `time.sleep(30)`: neither its signal nor the
  injected exception reaches it, so the ladder ends in a kill; "replaced" means
  `rt.stats().child_replacements` grew (the call's process, `isolation = "call"`), or
  `replacements` grew while `workers` stayed the same (the worker, `"shared"`); waited for,
  bounded.
- (e) memory is summed over this Ray node's processes with psutil (gcs, raylet, agents,
  every actor; not the driver); USS counts private pages only. The shared 2-worker pool
  serves every scope. The idle CPU is the executors' own CPU time over 5 s after the batches.

Figures as JSON (one line per figure):

```
{data}
```
""",
        encoding="utf-8",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, 10 scopes")
    parser.add_argument("--scopes", type=int, default=None, help="scopes in (e) (default 100)")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    parser.add_argument("--config", default=str(CONFIG), help="RuntimeConfig TOML")
    args = parser.parse_args()
    if args.scopes is None:
        args.scopes = 10 if args.quick else 100
    started = time.perf_counter()
    load = [round(os.getloadavg()[0], 1)]
    cfg = load_config(args.config)
    rt = RayRuntime.start(cfg, address=cfg.address or "local")
    try:
        figures = asyncio.run(run_all(rt, args))
    finally:
        rt.shutdown()
    seconds = time.perf_counter() - started
    load.append(round(os.getloadavg()[0], 1))
    m = {**machine(), "load": " → ".join(map(str, load))}
    print(f"machine: {_machine_line(m)}; load average {m['load']}; {seconds:.0f} s")
    print(table(figures))
    missed = [f.key for f in figures if f.met is False]
    print("all targets met" if not missed else f"targets missed: {', '.join(missed)}")
    if not args.no_write:
        write_results(figures, m, args, seconds)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
