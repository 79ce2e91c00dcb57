"""Latency, throughput and barriers on Ray, each side by side with raw Ray in one run.

Run: ``.venv/bin/python benchmarks/bench_perf.py [--quick] [--no-write]`` (about 3 min;
``--quick`` about 1 min). It starts its own local Ray from ``configs/local.toml`` (2
workers) twice over — one namespace with ``isolation = "call"`` (the default), one with
``"shared"`` — prints the table and writes ``benchmarks/RESULTS-perf.md``.

Figures (toolray and its reference interleaved, repetition by repetition):

- one-call batch round trip (``execute_batch`` of one no-op call, seen from this process)
  against a raw Ray two-hop actor call: this process → an async driver actor → an async
  worker actor whose method returns at once, and back (``RawBaseline.bare_relay``); the
  same two hops carrying the tool's name and arguments and running the no-op body
  (``RawBaseline.relay``) and the one-hop call are shown too. p50 and p99 over N round
  trips;
- CPU per one-call batch in each process on its path (driver, executor, workers, call
  processes) beside the bare two-hop call's (driver, relay actor, worker): where the time
  goes;
- no-op batch throughput, 1,000 calls, cap 1000, against raw per-call fan-out (the raw
  driver actor awaiting 1,000 bare calls on as many bare workers);
- parallel groups with barriers: [K safe + 1 exclusive] × n (K = 9, 3, 1; 300 no-op calls;
  cap 10) against raw Ray running the same schedule (each group gathered on the bare
  workers, then the exclusive call alone) — ``toolray bench``'s rows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from toolray import AbortController, ToolBatchInput, ToolCall
from toolray_actors import RayRuntime, load_config
from toolray_actors.bench._rawray import GroupShape, RawBaseline, bench_tool
from toolray_actors.cli._bench import BenchOptions, bench_rows, machine

RESULTS = Path(__file__).with_name("RESULTS-perf.md")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"
BARRIERS = ("mixed:9+1", "mixed:3+1", "mixed:1+1")

Step = Callable[[], Awaitable[object]]
"""One round trip to time."""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


@contextmanager
def _isolated(base: RayRuntime, isolation: str) -> Iterator[RayRuntime]:
    """A sibling runtime (own namespace and pool) with ``isolation``."""
    cfg = base.config.model_copy(
        update={
            "namespace": f"{base.config.namespace}-{isolation}",
            "detached": False,
            "pool": base.config.pool.model_copy(update={"isolation": isolation}),
        }
    )
    rt = RayRuntime.start(cfg)
    try:
        yield rt
    finally:
        rt.shutdown()


@asynccontextmanager
async def _lone_calls(rt: RayRuntime, key: str) -> AsyncIterator[tuple[Any, RawBaseline, Step]]:
    """Scope ``key`` with the no-op tool, its executor, a ready raw baseline, and a step that
    sends one one-call batch (raising if it fails); all of it is cleaned up afterwards."""
    scope = rt.scope(key)
    scope.register(bench_tool("noop"))
    handle = rt.executor(key)
    raw = RawBaseline(workers=1, threads=rt.config.pool.max_concurrency)
    calls = [ToolCall("c0", "bench_noop", "{}")]

    async def step() -> None:
        batch = ToolBatchInput(calls, AbortController().signal, scope=key)
        result = (await handle.execute_batch(batch)).results[0].result
        if result.is_error:
            raise RuntimeError(f"a one-call batch failed: {result.content}")

    try:
        await raw.ready()
        yield handle, raw, step
    finally:
        raw.close()
        scope.dispose()


async def one_call(rt: RayRuntime, rounds: int) -> dict[str, Any]:
    """One-call batch round trips against raw two-hop and one-hop calls, interleaved."""
    times: dict[str, list[float]] = {"toolray": [], "bare": [], "two_hop": [], "one_hop": []}
    async with _lone_calls(rt, "perf-latency") as (_, raw, step):
        for i in range(rounds + rounds // 10 + 5):  # the first tenth warms every path
            t0 = time.perf_counter()
            await step()
            t1 = time.perf_counter()
            await raw.bare_relay()
            t2 = time.perf_counter()
            await raw.relay("noop", {})
            t3 = time.perf_counter()
            await raw.workers[0].run.remote("noop", {})
            t4 = time.perf_counter()
            if i >= rounds // 10 + 5:
                for name, value in (
                    ("toolray", t1 - t0),
                    ("bare", t2 - t1),
                    ("two_hop", t3 - t2),
                    ("one_hop", t4 - t3),
                ):
                    times[name].append(value * 1000)
    out: dict[str, Any] = {"rounds": rounds}
    for name, values in times.items():
        out[name] = {"p50_ms": _pct(values, 0.5), "p99_ms": _pct(values, 0.99)}
    out["ratio"] = out["toolray"]["p50_ms"] / out["bare"]["p50_ms"]
    out["ratio_body"] = out["toolray"]["p50_ms"] / out["two_hop"]["p50_ms"]
    return out


async def cpu_split(rt: RayRuntime, rounds: int) -> dict[str, Any]:
    """CPU per one-call batch in each process on its path, beside the bare two-hop relay's.

    ``psutil`` CPU times (user + system, every thread) before and after ``rounds`` round
    trips in a row, per round trip in µs; the path is serial, so on few cores the sum is
    close to the latency. Toolray's workers and call processes are the namespace's.
    """
    import psutil

    async def measured(groups: dict[str, list[int]], step: Step) -> dict[str, float]:
        procs = {name: [psutil.Process(pid) for pid in pids] for name, pids in groups.items()}

        def cpu(ps: list[Any]) -> float:
            return sum(sum(p.cpu_times()[:2]) for p in ps if p.is_running())

        before = {name: cpu(ps) for name, ps in procs.items()}
        for _ in range(rounds):
            await step()
        return {name: (cpu(ps) - before[name]) / rounds * 1e6 for name, ps in procs.items()}

    async with _lone_calls(rt, "perf-cpu") as (handle, raw, step):
        for _ in range(20):  # every path warm
            await step()
            await raw.bare_relay()
        stats = await asyncio.to_thread(rt.stats)
        toolray = {
            "driver": [os.getpid()],
            "executor": [(await handle.statistics()).pid],
            "workers": [a.pid for a in stats.actors if a.kind == "worker"],
            "call processes": [pid for pool in stats.pools for pid in pool.child_pids],
        }
        bare = {
            "driver": [os.getpid()],
            "relay actor": [await raw.driver.pid.remote()],
            "worker": [await raw.workers[0].pid.remote()],
        }
        return {
            "rounds": rounds,
            "toolray": await measured(toolray, step),
            "bare": await measured(bare, raw.bare_relay),
        }


async def throughput(rt: RayRuntime, reps: int, shapes: tuple[str, ...], **kw: Any) -> list[Any]:
    """``toolray bench`` rows (toolray and raw Ray interleaved)."""
    opts = BenchOptions(shapes=tuple(GroupShape.parse(s) for s in shapes), repetitions=reps, **kw)
    return await bench_rows(rt, opts)


async def measure(base: RayRuntime, quick: bool) -> dict[str, Any]:
    reps = 3 if quick else 7
    rounds = 100 if quick else 400
    out: dict[str, Any] = {}
    for isolation in ("call", "shared"):
        with _isolated(base, isolation) as rt:
            out[f"latency-{isolation}"] = await one_call(rt, rounds)
            out[f"cpu-{isolation}"] = await cpu_split(rt, rounds)
            (row,) = await throughput(rt, reps, ("safe",), calls=1000, cap=1000)
            out[f"throughput-{isolation}"] = row
            rows = await throughput(rt, reps, BARRIERS, calls=300, cap=10)
            for row in rows:
                out[f"{row['shape']}-{isolation}"] = row
    return out


# ---------------------------------------------------------------------- the report
def _row_tp(label: str, row: dict[str, Any], target: str) -> str:
    ours, raw = row["toolray"], row["raw"]
    return (
        f"| {label} | {row['ratio']:.2f}× | {target} | toolray {ours['calls_per_s']:,.0f} "
        f"calls/s (wall {ours['wall_ms_median']:.0f} ms); raw Ray {raw['calls_per_s']:,.0f} "
        f"calls/s (wall {raw['wall_ms_median']:.0f} ms) |"
    )


def rows(fig: dict[str, Any]) -> list[str]:
    """The table rows, one per figure (the headline table reads some of them)."""
    out = []
    for iso in ("call", "shared"):
        lat = fig[f"latency-{iso}"]
        t, bare, two, one = lat["toolray"], lat["bare"], lat["two_hop"], lat["one_hop"]
        out.append(
            f'| one-call batch round trip, isolation "{iso}": p50 toolray / raw two-hop | '
            f"{lat['ratio']:.2f}× | ≤ 1.5× | toolray p50 {t['p50_ms']:.2f} ms / p99 "
            f"{t['p99_ms']:.2f} ms; bare two-hop {bare['p50_ms']:.2f} / {bare['p99_ms']:.2f} "
            f"ms; two-hop running the no-op body {two['p50_ms']:.2f} / {two['p99_ms']:.2f} ms "
            f"({lat['ratio_body']:.2f}×); one-hop {one['p50_ms']:.2f} / {one['p99_ms']:.2f} "
            f"ms; {lat['rounds']} rounds |"
        )
    for iso in ("call", "shared"):
        cpu = fig[f"cpu-{iso}"]
        ours, bare = cpu["toolray"], cpu["bare"]
        out.append(
            f'| CPU per one-call batch, isolation "{iso}": toolray / bare two-hop | '
            f"{sum(ours.values()):,.0f} / {sum(bare.values()):,.0f} µs | reported | toolray "
            + ", ".join(f"{k} {v:,.0f}" for k, v in ours.items())
            + "; bare two-hop "
            + ", ".join(f"{k} {v:,.0f}" for k, v in bare.items())
            + f" (µs per round trip, {cpu['rounds']} in a row) |"
        )
    for iso, target in (("shared", "≥ 2×"), ("call", "≥ 1.0×")):
        out.append(
            _row_tp(
                f'1,000 no-op calls, cap 1000, isolation "{iso}": toolray / raw per-call fan-out',
                fig[f"throughput-{iso}"],
                target,
            )
        )
    for iso in ("call", "shared"):
        for shape in BARRIERS:
            k = shape.split(":")[1].split("+")[0]
            out.append(
                _row_tp(
                    f"[{k} safe + 1 exclusive] × n, 300 no-op calls, cap 10, isolation "
                    f'"{iso}": toolray / raw same schedule',
                    fig[f"{shape}-{iso}"],
                    "≥ 1.0×",
                )
            )
    return out


def write(fig: dict[str, Any], meta: dict[str, Any], quick: bool) -> None:
    head = (
        "# Latency, throughput and barriers on Ray\n\n"
        f"`benchmarks/bench_perf.py{' --quick' if quick else ''}` — one run, "
        f"{meta['seconds']:.0f} s; a local Ray from `configs/local.toml` (2 workers), one "
        'namespace with `isolation = "call"` (the default) and one with `"shared"`; toolray '
        "and its raw Ray reference interleaved repetition by repetition, medians.\n\n"
        f"Machine: {meta['platform']}, nproc {meta['nproc']}, Python {meta['python']}, "
        f"Ray {meta['ray']}\nDate: {meta['date']}; 1-minute load average {meta['load']} "
        "at the start and the end of the run (other sessions shared the machine).\n\n"
        "| figure | measured | target | detail |\n|---|---:|---|---|\n"
    )
    how = (
        "\nHow each figure is taken:\n"
        "- Round trip: `ExecutorHandle.execute_batch` of one no-op call, timed in this "
        "process. The reference (the ratio) is the bare two-hop call: this process → an "
        "async driver actor → an async worker actor whose method returns at once, no "
        "argument, and back. Beside it, the same two hops carrying the tool's name and "
        "arguments and running the no-op body on the worker, as a plain Ray program would "
        "run the tool; the one-hop call runs the body on the worker straight from this "
        "process.\n"
        "- CPU: `psutil` CPU times (user + system, every thread) of each process on the "
        "path before and after that many round trips in a row (one-call batches, then bare "
        "two-hop calls); on 2 cores the path is serial, so the sum is close to the latency. "
        "A toolray batch is one message (no reservation: the executor's ledger tells, after "
        "a death, whether it started).\n"
        "- Throughput: calls / median wall time of one batch seen from this process; raw Ray "
        "is one async driver actor awaiting the same bare calls (same cap, least-loaded pick, "
        "same stages) on as many bare worker actors (`toolray_actors/bench/_rawray.py`).\n"
        "- Barriers: the batches have no hook, guard, observer or log, so toolray runs each "
        "as one chain (docs: How a batch runs): the whole batch goes to one worker, which "
        "starts each call in its turn; raw Ray runs the schedule stage by stage from its "
        "driver actor, one round trip a stage.\n"
    )
    RESULTS.write_text(head + "\n".join(rows(fig)) + "\n" + how, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and repetitions")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    parser.add_argument("--config", default=str(CONFIG), help="RuntimeConfig TOML")
    args = parser.parse_args()
    started = time.perf_counter()
    load = [round(os.getloadavg()[0], 1)]
    cfg = load_config(args.config)
    base = RayRuntime.start(cfg, address=cfg.address or "local")
    try:
        fig = asyncio.run(measure(base, args.quick))
    finally:
        base.shutdown()
    load.append(round(os.getloadavg()[0], 1))
    meta = {
        **machine(),
        "load": " → ".join(map(str, load)),
        "seconds": time.perf_counter() - started,
        "date": time.strftime("%Y-%m-%d %H:%M"),
    }
    print("\n".join(rows(fig)))
    if not args.no_write:
        write(fig, meta, args.quick)
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
