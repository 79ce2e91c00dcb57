"""Batch deadlines, measured: how long after its ``deadline_s`` a batch is back, per backend.

Run: ``.venv/bin/python benchmarks/deadlines.py [--quick] [--no-write]`` (about a minute).
Each repetition submits one batch with ``deadline_s = 0.5``: a body that hangs in one
C-level sleep (deaf to its signal: only a kill, or in-process abandoning it, ends its
call), a cooperative body that waits for its signal, and two exclusive calls behind them
that never start. The batch is measured from its submission to its result, in-process
(``BatchExecutor(kill_grace_ms=300)``, real time) and on Ray with ``configs/local.toml``
(``kill_grace_ms = 300``), isolation ``"call"`` and ``"shared"``, interleaved.

Target: every call ``DEADLINE_EXCEEDED`` (fault ``"cancelled"``) and the batch back by
``deadline_s + kill_grace_ms + 100 ms``; writes ``benchmarks/RESULTS-deadlines.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from toolray import (
    BatchExecutor,
    ToolBatchInput,
    ToolCall,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray_actors import RayRuntime, RuntimeConfig, load_config
from toolray_actors.cli._bench import machine

RESULTS = Path(__file__).with_name("RESULTS-deadlines.md")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"
DEADLINE_S = 0.5
GRACE_MS = 300.0
OUT = ToolOutput(schema={"type": "string"}, render=lambda args, value: [text_block(value)])


def _hang(args: Any, ctx: Any) -> str:
    time.sleep(float(args.get("s", 5)))  # deaf to its signal
    return "hung"


async def _cooperative(args: Any, ctx: Any) -> str:
    await ctx.signal.wait()
    return "stopped"


def tools() -> list[Any]:
    """The benchmark's tools (their code travels by value to Ray workers)."""
    safe = {"is_concurrency_safe": lambda args: True}
    return [
        define_tool(
            name="dl_hang", description="Hang", parameters={"s": {"type": "number"}},
            output=OUT, execute=_hang, **safe,
        ),
        define_tool(
            name="dl_wait", description="Wait", parameters={}, output=OUT,
            execute=_cooperative, **safe,
        ),
        define_tool(
            name="dl_never", description="Exclusive", parameters={}, output=OUT,
            execute=lambda args, ctx: "ran",
        ),
    ]  # fmt: skip


def batch(scope: str | None) -> ToolBatchInput:
    """One batch: a hung call, a cooperative one, two exclusive ones that never start."""
    calls = [
        ToolCall("c1", "dl_hang", '{"s": 5}'),
        ToolCall("c2", "dl_wait", "{}"),
        ToolCall("c3", "dl_never", "{}"),
        ToolCall("c4", "dl_never", "{}"),
    ]
    return ToolBatchInput(calls, scope=scope, deadline_s=DEADLINE_S)


def _all_exceeded(result: Any) -> bool:
    return all(
        r.result.is_error
        and r.result.error.info is not None
        and r.result.error.info.code == "DEADLINE_EXCEEDED"
        and r.result.error.fault == "cancelled"
        for r in result.results
    )


async def _measure(run: Any, scope: str | None) -> tuple[float, bool]:
    started = time.perf_counter()
    result = await run(batch(scope))
    return time.perf_counter() - started, _all_exceeded(result)


def _runtime(base: Any, isolation: str) -> RayRuntime:
    data = base.model_dump()
    data.update(namespace=f"{data['namespace']}-deadlines-{isolation}", detached=False)
    data["pool"] = {**data["pool"], "isolation": isolation}
    rt = RayRuntime.start(RuntimeConfig.model_validate(data))
    for definition in tools():
        rt.registry.register(definition)
    return rt


async def measure_all(base: Any, reps: int) -> dict[str, list[tuple[float, bool]]]:
    """Every backend, interleaved: ``reps`` batches each (after one warm-up)."""
    reg = ToolRegistry()
    reg.set_executor(BatchExecutor(reg, kill_grace_ms=GRACE_MS))
    for definition in tools():
        reg.register(definition)
    runtimes = {iso: _runtime(base, iso) for iso in ("call", "shared")}
    runs: dict[str, tuple[Any, str | None]] = {"in-process": (reg.execute_batch, None)}
    for iso, rt in runtimes.items():
        runs[f'Ray, isolation "{iso}"'] = (rt.executor("dl-scope").execute_batch, "dl-scope")
    out: dict[str, list[tuple[float, bool]]] = {name: [] for name in runs}
    try:
        for run, scope in runs.values():
            await _measure(run, scope)  # warm-up: pools, processes, the executor actor
        for _ in range(reps):
            for name, (run, scope) in runs.items():
                out[name].append(await _measure(run, scope))
    finally:
        for rt in runtimes.values():
            rt.shutdown()
    return out


def table(measured: dict[str, list[tuple[float, bool]]]) -> tuple[str, list[str]]:
    """The Markdown table and the target lines."""
    target_ms = GRACE_MS + 100
    lines = [
        "| backend | batches | all calls DEADLINE_EXCEEDED | back after the deadline, p50 / max "
        "| target |",
        "|---|---:|---|---:|---|",
    ]
    checks = []
    for name, runs in measured.items():
        over = [(s - DEADLINE_S) * 1000 for s, _ in runs]
        ok = all(flag for _, flag in runs)
        p50, worst = statistics.median(over), max(over)
        lines.append(
            f"| {name} | {len(runs)} | {ok} | {p50:.0f} ms / {worst:.0f} ms "
            f"| ≤ kill_grace_ms + 100 = {target_ms:g} ms |"
        )
        checks.append(
            f"{'PASS' if ok and worst <= target_ms else 'FAIL'} {name}: every call "
            f"DEADLINE_EXCEEDED {ok}, back {worst:.0f} ms after the deadline at worst "
            f"(≤ {target_ms:g} ms)"
        )
    return "\n".join(lines), checks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-write", action="store_true", help=f"do not write {RESULTS.name}")
    args = parser.parse_args()
    reps = 5 if args.quick else 15
    load = [round(os.getloadavg()[0], 1)]
    started = time.perf_counter()
    cfg = load_config(str(CONFIG))
    owner = RayRuntime.start(cfg, address=cfg.address or "local")
    try:
        measured = asyncio.run(measure_all(cfg, reps))
    finally:
        owner.shutdown()
    seconds = time.perf_counter() - started
    load.append(round(os.getloadavg()[0], 1))
    m = machine()
    text, checks = table(measured)
    body = f"""# Batch deadlines: back by the deadline + kill grace

`benchmarks/deadlines.py`{" --quick" if args.quick else ""} — one run, {seconds:.0f} s in all,
a local Ray from `configs/local.toml` (`kill_grace_ms = 300`, `cancel_grace_ms = 50`).
Machine: {m["platform"]}, nproc {m["nproc"]}, Python {m["python"]}, Ray {m["ray"]}.
Date: {time.strftime("%Y-%m-%d %H:%M")}; 1-minute load average {" → ".join(map(str, load))}
at the start and the end (other sessions shared the machine: figures are noisy).

Each batch (`deadline_s = {DEADLINE_S:g}`): a body hung in one C-level sleep (deaf to its
signal), a cooperative body waiting for its signal, and two exclusive calls behind them
that never start. Measured from the submission to the result; backends interleaved.

{text}

## Targets

{chr(10).join(f"- {c}" for c in checks)}
"""
    print(body)
    if not args.no_write:
        RESULTS.write_text(body, encoding="utf-8")
        print(f"wrote {RESULTS}", file=sys.stderr)


if __name__ == "__main__":
    main()
