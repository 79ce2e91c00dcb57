"""``isolation="sandbox"`` against ``"call"``: a no-op call's round trip, side by side in one run.

Run: ``.venv/bin/python benchmarks/bench_sandbox.py [--quick] [--no-write]`` (about a minute).
It starts its own local Ray from ``configs/local.toml`` and registers one no-op tool twice —
on the default pool (``isolation="call"``) and on ``Placement(isolation="sandbox")`` — then
times one-call batches of each, interleaved round by round:

- *warm*: a short pause (``--pause-ms``, default 40) before each pair of round trips, so a
  confined sandbox waits for the call (its pool forks and confines the next one after
  each call, off the call's path): what an agent's turn, which thinks between its calls,
  sees. The ``"call"`` round trip gets the same pause;
- *back to back*: no pause: each sandbox call also waits for its replacement to be forked
  and confined whenever the warm ones ran out — the sandbox pool's sustained rate.

It also reports, from a sandbox, the layers in force (``RayRuntime.confinement()``). It
writes ``benchmarks/RESULTS-sandbox.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time
from pathlib import Path
from typing import Any

from toolray import Placement, ToolBatchInput, ToolCall, ToolOutput, define_tool, text_block
from toolray_actors import RayRuntime

RESULTS = Path(__file__).with_name("RESULTS-sandbox.md")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"


def _noop(args: Any, ctx: Any) -> Any:
    return 1


def _tool(name: str, placement: Placement | None) -> Any:
    return define_tool(
        name=name,
        description="no-op",
        parameters={},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block("1")]),
        execute=_noop,
        placement=placement,
    )


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _round_trip(handle: Any, name: str) -> float:
    batch = ToolBatchInput([ToolCall("c0", name, {})])
    started = time.perf_counter()
    result = (await handle.execute_batch(batch)).results[0].result
    elapsed = (time.perf_counter() - started) * 1000
    if result.is_error:
        raise RuntimeError(f"{name} failed: {result.content}")
    return elapsed


async def measure(rt: RayRuntime, rounds: int, pause_s: float) -> dict[str, Any]:
    scope = rt.scope("bench-sandbox")
    scope.register(_tool("call_noop", None))
    scope.register(_tool("sandbox_noop", Placement(isolation="sandbox")))
    handle = rt.executor("bench-sandbox")
    out: dict[str, Any] = {}
    for mode, pause in (("warm", pause_s), ("back to back", 0.0)):
        times: dict[str, list[float]] = {"call": [], "sandbox": []}
        for i in range(rounds + rounds // 10 + 5):  # the first tenth warms every path
            await asyncio.sleep(pause)
            call = await _round_trip(handle, "call_noop")
            await asyncio.sleep(pause)
            boxed = await _round_trip(handle, "sandbox_noop")
            if i >= rounds // 10 + 5:
                times["call"].append(call)
                times["sandbox"].append(boxed)
        row = {k: {"p50": _pct(v, 0.5), "p99": _pct(v, 0.99)} for k, v in times.items()}
        row["ratio"] = row["sandbox"]["p50"] / row["call"]["p50"]
        out[mode] = row
    scope.dispose()
    return out


def _report(figures: dict[str, Any], confinement: str, rounds: int, seconds: float) -> str:
    load = os.getloadavg()[0]
    lines = [
        '# `isolation="sandbox"` against `"call"`',
        "",
        f"`benchmarks/bench_sandbox.py` — one run, {seconds:.0f} s; a local Ray from "
        '`configs/local.toml`; one no-op tool on the default pool (`"call"`) and on '
        '`Placement(isolation="sandbox")`, one-call batches interleaved round by round, '
        f"{rounds} rounds each.",
        "",
        f"Machine: {platform.platform()}, nproc {os.cpu_count()}, Python "
        f"{platform.python_version()}; 1-minute load average {load:.1f} at the end.",
        "",
        f"Layers in force (`RayRuntime.confinement().describe()`): {confinement}",
        "",
        "| figure | measured | target | detail |",
        "|---|---:|---|---|",
    ]
    warm, busy = figures["warm"], figures["back to back"]
    lines.append(
        f"| no-op round trip, warm: sandbox / call p50 | {warm['ratio']:.2f}× | ≤ 2× | "
        f"sandbox p50 {warm['sandbox']['p50']:.2f} ms / p99 {warm['sandbox']['p99']:.2f} ms; "
        f"call p50 {warm['call']['p50']:.2f} / p99 {warm['call']['p99']:.2f} ms |"
    )
    lines.append(
        f"| no-op round trip, warm: sandbox p50 | {warm['sandbox']['p50']:.2f} ms | ≤ 15 ms | "
        "a confined sandbox waits for the call |"
    )
    lines.append(
        f"| no-op round trip, back to back: sandbox / call p50 | {busy['ratio']:.2f}× | reported "
        f"| sandbox p50 {busy['sandbox']['p50']:.2f} ms / p99 {busy['sandbox']['p99']:.2f} ms; "
        f"call p50 {busy['call']['p50']:.2f} / p99 {busy['call']['p99']:.2f} ms |"
    )
    lines += [
        "",
        "How each figure is taken: `ExecutorHandle.execute_batch` of one no-op call, timed in "
        'this process; a `"call"` and a `"sandbox"` round trip alternate. Warm: a pause '
        "before each round trip lets the sandbox pool fork and confine the next sandbox "
        "(a sandbox serves one call and is killed; the next one is forked from the template, "
        "put in its namespaces, new root, Landlock domain and syscall filter, and warms up "
        "before it says it is ready). Back to back: no pause, so sandbox calls also wait for "
        "that when the warm ones ran out.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 rounds instead of 300")
    parser.add_argument("--pause-ms", type=float, default=40.0, help="the warm pause (40)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args()
    rounds = 100 if args.quick else 300
    started = time.monotonic()
    rt = RayRuntime.start(CONFIG, address="local")
    try:
        confinement = rt.confinement().describe()
        figures = asyncio.run(measure(rt, rounds, args.pause_ms / 1000))
    finally:
        rt.shutdown()
    report = _report(figures, confinement, rounds, time.monotonic() - started)
    print(report)
    if not args.no_write:
        RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
