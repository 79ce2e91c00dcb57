"""Per-call pipeline benchmark: ``registry.execute()`` overhead on a no-op tool.

Run: ``.venv/bin/python benchmarks/bench_pipeline.py [--profile] [--no-write]`` (about 15
s; ``--profile`` adds a cProfile of the no-hook async case, which a missed target adds on
its own); it prints the table and writes ``benchmarks/RESULTS-pipeline.md``. Each figure
is the best of several timed rounds of back-to-back calls on one asyncio loop, in µs per
call:

- **direct**: calling the tool body itself (``await body(args, ctx)`` for the async tool,
  ``body(args, ctx)`` for the sync one, plus ``await asyncio.to_thread(body, …)`` — the
  thread hop every sync body pays in-process);
- **execute, no hooks**: ``await registry.execute(ToolExecutionInput(…))`` with only the
  tool registered;
- **execute, 5 hooks**: the same with one pre-execute listener, one guard, one around
  wrapper, one post-execute listener and one (sync) result observer, each a pass-through.

Targets: ≤ 25 µs per call without hooks (async no-op), ≤ 2× that with the
five hooks. The sync tool is reported separately (its floor is the thread hop).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import platform
import pstats
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from toolray import (
    AbortController,
    ToolExecutionInput,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
    define_tool,
    text_block,
)

ROUNDS = 7
CALLS_PER_ROUND = 2_000
THREAD_CALLS_PER_ROUND = 500
TARGET_NO_HOOKS_US = 25.0
TARGET_HOOK_RATIO = 2.0
RESULTS = Path(__file__).with_name("RESULTS-pipeline.md")

OUTPUT = ToolOutput(schema={"type": "string"}, render=lambda args, value: [text_block(value)])


async def _async_body(args: Any, ctx: Any) -> str:
    return "ok"


def _sync_body(args: Any, ctx: Any) -> str:
    return "ok"


def _registry(*, hooks: bool) -> ToolRegistry:
    reg = ToolRegistry()
    for name, body in (("noop_async", _async_body), ("noop_sync", _sync_body)):
        reg.register(
            define_tool(name=name, description=name, parameters={}, output=OUTPUT, execute=body)
        )
    if hooks:

        async def pre(execution: Any, next_: Any) -> Any:
            return await next_()

        async def around(execution: Any, next_: Any) -> Any:
            return await next_()

        async def post(execution: Any, result: Any, next_: Any) -> Any:
            return await next_()

        reg.on_pre_execute(pre)
        reg.guard(lambda execution: None)
        reg.on_execute(around)
        reg.on_post_execute(post)
        reg.on_result(lambda execution, result: None)
    return reg


async def _best(step: Callable[[], Awaitable[Any]], calls: int) -> float:
    """Best-of-ROUNDS µs per awaited ``step()``."""
    for _ in range(calls // 10):  # warm-up (caches, compiled validators, thread pool)
        await step()
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(calls):
            await step()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def _executor(reg: ToolRegistry, name: str) -> Callable[[], Awaitable[Any]]:
    inp = ToolExecutionInput("c1", name, {}, AbortController().signal)

    async def step() -> Any:
        result = await reg.execute(inp)
        assert not result.is_error
        return result

    return step


def _direct(body: Callable[..., Any], *, thread: bool = False) -> Callable[[], Awaitable[Any]]:
    ctx = ToolRunContext(None, AbortController().signal, call_id="c1", name="noop")
    args: dict[str, Any] = {}
    if thread:

        async def hop() -> Any:
            return await asyncio.to_thread(body, args, ctx)

        return hop
    if asyncio.iscoroutinefunction(body):

        async def call_async() -> Any:
            return await body(args, ctx)

        return call_async

    async def call_sync() -> Any:
        return body(args, ctx)

    return call_sync


async def _measure() -> dict[str, float]:
    plain, hooked = _registry(hooks=False), _registry(hooks=True)
    return {
        "async direct": await _best(_direct(_async_body), CALLS_PER_ROUND),
        "async no hooks": await _best(_executor(plain, "noop_async"), CALLS_PER_ROUND),
        "async 5 hooks": await _best(_executor(hooked, "noop_async"), CALLS_PER_ROUND),
        "sync direct": await _best(_direct(_sync_body), CALLS_PER_ROUND),
        "sync thread hop": await _best(_direct(_sync_body, thread=True), THREAD_CALLS_PER_ROUND),
        "sync no hooks": await _best(_executor(plain, "noop_sync"), THREAD_CALLS_PER_ROUND),
        "sync 5 hooks": await _best(_executor(hooked, "noop_sync"), THREAD_CALLS_PER_ROUND),
    }


def _profile(calls: int = 20_000) -> str:
    reg = _registry(hooks=False)
    step = _executor(reg, "noop_async")

    async def run() -> None:
        for _ in range(calls):
            await step()

    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(run())
    profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(r"src/toolray", 10)  # asyncio frames omitted
    stats.sort_stats("tottime").print_stats(10)
    return out.getvalue()


def _table(f: dict[str, float]) -> list[str]:
    rows = [
        ("async no-op", f["async direct"], f["async no hooks"], f["async 5 hooks"]),
        ("sync no-op", f["sync direct"], f["sync no hooks"], f["sync 5 hooks"]),
    ]
    lines = [
        f"{'tool':<12} {'direct':>8} {'no hooks':>9} {'5 hooks':>9} "
        f"{'nohook/direct':>14} {'hooks/nohook':>13}",
    ]
    lines.append("-" * len(lines[0]))
    for name, direct, plain, hooked in rows:
        lines.append(
            f"{name:<12} {direct:>8.2f} {plain:>9.2f} {hooked:>9.2f} "
            f"{plain / direct:>13.1f}x {hooked / plain:>12.2f}x"
        )
    lines.append(f"sync thread hop alone (asyncio.to_thread): {f['sync thread hop']:.2f} µs")
    return lines


def write(f: dict[str, float], met: tuple[bool, bool], profile: str, seconds: float) -> None:
    """``RESULTS-pipeline.md``: the method, the machine, the table, the targets (and the
    profile when one was taken)."""
    rows = []
    for kind in ("async", "sync"):
        direct, plain, hooked = f[f"{kind} direct"], f[f"{kind} no hooks"], f[f"{kind} 5 hooks"]
        rows.append(
            f"| {kind} no-op | {direct:.2f} | {plain:.2f} | {hooked:.2f} | "
            f"{plain / direct:.0f}× | {hooked / plain:.2f}× |"
        )
    plain, hooked = f["async no hooks"], f["async 5 hooks"]
    verdict = ("met", "**missed**")
    text = f"""# Per-call pipeline benchmark results

`benchmarks/bench_pipeline.py` (run: `.venv/bin/python benchmarks/bench_pipeline.py`,
{seconds:.0f} s; {time.strftime("%Y-%m-%d %H:%M")}).

Machine: {platform.machine()}, nproc {os.cpu_count()}, {platform.system()} {platform.release()},
CPython {sys.version.split()[0]}. Each figure is the best of {ROUNDS} rounds of
back-to-back calls on one asyncio loop ({CALLS_PER_ROUND:,} calls per round for async
bodies, {THREAD_CALLS_PER_ROUND} for sync ones), after a warm-up, in µs per call. The same
`ToolExecutionInput` is reused for every call.

- **direct**: the tool body called by hand (`await body(args, ctx)` / `body(args, ctx)`).
- **no hooks**: `await registry.execute(ToolExecutionInput(...))`, only the tool registered
  (`define_tool`, no parameters, string output rendered as one text block).
- **5 hooks**: plus one pre-execute listener, one guard, one around wrapper, one
  post-execute listener (all pass-through, async) and one sync result observer.

| tool | direct | no hooks | 5 hooks | no hooks / direct | 5 hooks / no hooks |
|---|---:|---:|---:|---:|---:|
{chr(10).join(rows)}

`asyncio.to_thread` alone (the hop every sync body pays in-process): \
{f["sync thread hop"]:.1f} µs.

## Targets

- ≤ {TARGET_NO_HOOKS_US:.0f} µs per call without hooks (async no-op): \
{verdict[not met[0]]} — {plain:.1f} µs.
- ≤ {TARGET_HOOK_RATIO:.0f}× that with the five hooks: {verdict[not met[1]]} — \
{hooked / plain:.2f}×.
"""
    if profile:
        text += f"\n## Profile (a target was missed, or `--profile`)\n\n```\n{profile}```\n"
    RESULTS.write_text(text, encoding="utf-8")


def main() -> None:
    started = time.perf_counter()
    print(f"python {sys.version.split()[0]} on {platform.machine()}, nproc={os.cpu_count()}")
    print("µs per call, best of", ROUNDS, "rounds (lower is better)")
    figures = asyncio.run(_measure())
    for line in _table(figures):
        print(line)
    plain, hooked = figures["async no hooks"], figures["async 5 hooks"]
    met_plain = plain <= TARGET_NO_HOOKS_US
    met_ratio = hooked / plain <= TARGET_HOOK_RATIO
    print(
        f"target no hooks <= {TARGET_NO_HOOKS_US:.0f} µs: {'met' if met_plain else 'MISSED'}; "
        f"5 hooks <= {TARGET_HOOK_RATIO:.0f}x: {'met' if met_ratio else 'MISSED'}"
    )
    profile = ""
    if "--profile" in sys.argv or not (met_plain and met_ratio):
        profile = _profile()
        print()
        print("cProfile, async no-op without hooks (top 10 cumulative in toolray, top 10 tottime):")
        print(profile)
    seconds = time.perf_counter() - started
    if "--no-write" not in sys.argv:
        write(figures, (met_plain, met_ratio), profile, seconds)
        print(f"wrote {RESULTS}")
    print(f"total {seconds:.1f} s")


if __name__ == "__main__":
    main()
