"""Batch executor benchmark: throughput of no-op calls and latency of sleeping calls.

Run: ``.venv/bin/python benchmarks/bench_batch.py [--write]`` (about 10 s). Each scenario
runs once to warm up and then ``REPEATS`` times; the table shows the median (and the best)
wall time of one ``BatchExecutor.execute`` call. ``--write`` also writes
``benchmarks/RESULTS-batch.md`` with the figures and the machine.

Scenarios (targets from the brief; the TypeScript original's figures in brackets):

- 1,000 no-op parallel-safe calls, cap 10 and cap 100: calls per second (no target);
- 64 safe calls each awaiting 50 ms (``asyncio.sleep`` in the body), cap 64:
  ≤ 1.15 × the 50 ms ideal;
- 100 safe 10 ms calls: cap 100 ≤ 15 ms [≈ 20 ms], cap 10 ≤ 105 ms [≈ 112 ms];
- 10 × [9 safe + 1 exclusive] 10 ms calls, cap 10: ≤ 215 ms against the 200 ms critical
  path [≈ 228 ms].
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolray import (
    AbortController,
    BatchExecutor,
    ToolBatchInput,
    ToolCall,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)

REPEATS = 5
RESULTS = Path(__file__).with_name("RESULTS-batch.md")


def _registry() -> ToolRegistry:
    reg = ToolRegistry()
    output = ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)])

    async def noop(args: Any, ctx: Any) -> str:
        return "ok"

    async def sleepy(args: Any, ctx: Any) -> str:
        await asyncio.sleep(args["ms"] / 1000)
        return "ok"

    reg.register(
        define_tool(
            name="noop",
            description="does nothing",
            parameters={"i": {"type": "integer"}},
            output=output,
            execute=noop,
            is_concurrency_safe=lambda a: True,
        )
    )
    reg.register(
        define_tool(
            name="sleep",
            description="sleeps ms milliseconds",
            parameters={
                "ms": {"type": "number", "required": True},
                "exclusive": {"type": "boolean"},
            },
            output=output,
            execute=sleepy,
            is_concurrency_safe=lambda a: not a.get("exclusive", False),
        )
    )
    return reg


def _noop_calls(n: int) -> list[ToolCall]:
    return [ToolCall(f"c{i}", "noop", json.dumps({"i": i})) for i in range(n)]


def _sleep_calls(n: int, ms: float) -> list[ToolCall]:
    return [ToolCall(f"c{i}", "sleep", json.dumps({"ms": ms})) for i in range(n)]


def _barrier_calls(rounds: int, safe: int, ms: float) -> list[ToolCall]:
    calls: list[ToolCall] = []
    for r in range(rounds):
        for i in range(safe):
            calls.append(ToolCall(f"c{r}-{i}", "sleep", json.dumps({"ms": ms})))
        body = json.dumps({"ms": ms, "exclusive": True})
        calls.append(ToolCall(f"c{r}-x", "sleep", body))
    return calls


async def _time_batch(executor: BatchExecutor, calls: list[ToolCall], cap: int) -> float:
    batch = ToolBatchInput(calls, AbortController().signal, max_parallel_tool_calls=cap)
    start = time.perf_counter()
    result = await executor.execute(batch)
    elapsed = time.perf_counter() - start
    failed = [r.call_id for r in result.results if r.result.is_error]
    if failed or len(result.results) != len(calls):
        raise SystemExit(f"benchmark batch failed: {failed[:3]}")
    return elapsed


async def _floor_pool(n: int, ms: float, cap: int) -> float:
    """Plain asyncio, no toolray: ``n`` sleeps through a rolling pool of ``cap``."""
    gate = asyncio.Semaphore(cap)

    async def one() -> None:
        async with gate:
            await asyncio.sleep(ms / 1000)

    start = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(n)))
    return time.perf_counter() - start


async def _floor_barriers(rounds: int, safe: int, ms: float) -> float:
    """Plain asyncio: ``rounds`` × (``safe`` sleeps at once, then one alone)."""
    start = time.perf_counter()
    for _ in range(rounds):
        await asyncio.gather(*(asyncio.sleep(ms / 1000) for _ in range(safe)))
        await asyncio.sleep(ms / 1000)
    return time.perf_counter() - start


async def _median_ms(make: Any) -> float:
    await make()
    return statistics.median([await make() for _ in range(REPEATS)]) * 1000


@dataclass
class Row:
    scenario: str
    unit: str
    median: float
    best: float
    ideal: float | None
    target: float | None
    original: str
    floor: float | None = None

    @property
    def ratio(self) -> float | None:
        return None if self.ideal is None else self.median / self.ideal

    @property
    def verdict(self) -> str:
        if self.target is None:
            return "—"
        return "ok" if self.median <= self.target else "MISS"


async def _measure(executor: BatchExecutor, calls: list[ToolCall], cap: int) -> list[float]:
    await _time_batch(executor, calls, cap)  # warm-up
    return [await _time_batch(executor, calls, cap) for _ in range(REPEATS)]


async def run() -> list[Row]:
    executor = BatchExecutor(_registry())
    rows: list[Row] = []
    for cap in (10, 100):
        times = await _measure(executor, _noop_calls(1000), cap)
        rows.append(
            Row(
                f"1,000 no-op safe calls, cap {cap}",
                "calls/s",
                1000 / statistics.median(times),
                1000 / min(times),
                None,
                None,
                "—",
            )
        )
    latency = [
        ("64 × 50 ms safe, cap 64", _sleep_calls(64, 50), 64, 50.0, 50.0 * 1.15, "—"),
        ("100 × 10 ms safe, cap 100", _sleep_calls(100, 10), 100, 10.0, 15.0, "≈ 20 ms"),
        ("100 × 10 ms safe, cap 10", _sleep_calls(100, 10), 10, 100.0, 105.0, "≈ 112 ms"),
        (
            "10 × [9 safe + 1 exclusive] 10 ms, cap 10",
            _barrier_calls(10, 9, 10),
            10,
            200.0,
            215.0,
            "≈ 228 ms",
        ),
    ]
    floors = [
        lambda: _floor_pool(64, 50, 64),
        lambda: _floor_pool(100, 10, 100),
        lambda: _floor_pool(100, 10, 10),
        lambda: _floor_barriers(10, 9, 10),
    ]
    for (name, calls, cap, ideal, target, original), floor in zip(latency, floors, strict=True):
        times = [t * 1000 for t in await _measure(executor, calls, cap)]
        row = Row(name, "ms", statistics.median(times), min(times), ideal, target, original)
        row.floor = await _median_ms(floor)
        rows.append(row)
    executor.close()
    return rows


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:,.0f}" if value >= 1000 else f"{value:.1f}"
    return f"{text} {unit}".strip()


def table(rows: list[Row]) -> str:
    header = (
        "| scenario | median | best | ideal | target | median / ideal | median / target "
        "| target met | plain-asyncio floor | original |"
    )
    lines = [header, "|---|---:|---:|---:|---:|---:|---:|:---:|---:|---:|"]
    for r in rows:
        ratio = "—" if r.ratio is None else f"{r.ratio:.3f}×"
        vs_target = "—" if r.target is None else f"{r.median / r.target:.3f}×"
        lines.append(
            f"| {r.scenario} | {_fmt(r.median, r.unit)} | {_fmt(r.best, r.unit)} "
            f"| {_fmt(r.ideal, r.unit)} | {_fmt(r.target, r.unit)} | {ratio} | {vs_target} "
            f"| {r.verdict} | {_fmt(r.floor, r.unit)} | {r.original} |"
        )
    return "\n".join(lines)


def machine() -> str:
    return (
        f"{platform.platform()}, nproc {os.cpu_count()}, "
        f"Python {platform.python_version()} ({platform.python_implementation()})"
    )


def write_results(rows: list[Row]) -> None:
    text = f"""# Batch executor benchmark

`benchmarks/bench_batch.py` — median (and best) of {REPEATS} timed runs after one warm-up,
wall time of one `BatchExecutor.execute` call, in-process (asyncio; async bodies).

Machine: {machine()}
Date: {time.strftime("%Y-%m-%d")}

{table(rows)}

"median / ideal" compares with the ideal schedule (every parallel group takes exactly one
body duration); "median / target" above 1 means the target is missed. The plain-asyncio
floor runs the same schedule with bare `asyncio.sleep` tasks (a semaphore pool, or
gather-per-group for the barriers): what the event loop's timers alone cost on this machine.
Throughput rows have no target; they measure the per-call overhead of the scheduler and
pipeline (no-op async bodies, no hooks, no log).
"""
    RESULTS.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {RESULTS.name}")
    args = parser.parse_args()
    rows = asyncio.run(run())
    print(f"machine: {machine()}")
    print(table(rows))
    if args.write:
        write_results(rows)
        print(f"wrote {RESULTS}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
