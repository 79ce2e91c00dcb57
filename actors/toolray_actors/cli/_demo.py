"""``toolray demo``: start an embedded local Ray and show what toolray does, batch by batch.

Seven scenes, batches printed as timelines (which worker ran which call, when, in which
stage) with their results: (1) a parallel group of reads, an exclusive write barrier, more
reads; (2) a tool ignoring its deadline, answered by killing and replacing its worker;
(3) a user cancellation mid-batch; (4) a worker process crash; (5) a scope whose
restriction hides a tool; (6) Code Mode: one ``run_code`` program calling several tools;
(7) environments: a world per trajectory, forked, read for rewards, lost loudly.
The configuration is loaded before Ray starts (``--config``,
else ``$TOOLRAY_CONFIG``, else the shipped ``local`` config); the
demo runs in its own namespace, never leaves detached actors behind, and always shuts
Ray down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import textwrap
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolray import (
    AbortController,
    BatchExecutor,
    Disposer,
    TimeoutPolicy,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
)
from toolray_actors._config import RuntimeConfig, load_config

from . import _demo_tools
from ._demo_code import code_scene
from ._demo_env import env_scene
from ._timeline import render_results, render_timeline

if TYPE_CHECKING:
    from toolray_actors._stats import RuntimeStats
    from toolray_actors.driver._executor_handle import ExecutorHandle
    from toolray_actors.driver._runtime import RayRuntime

__all__ = (
    "DemoSession",
    "LocalRunner",
    "RayRunner",
    "add_arguments",
    "barrier_calls",
    "cancel_batch",
    "crash_calls",
    "open_session",
    "resolve_config",
    "run",
    "say",
    "timeout_calls",
)

DEFAULT_CONFIG = "local"
RESTRICTED_SCOPE = "demo-readonly"


def resolve_config(path: str | None) -> RuntimeConfig:
    """``--config``, else ``$TOOLRAY_CONFIG``, else the shipped ``local`` config."""
    cfg = load_config(path or os.environ.get("TOOLRAY_CONFIG") or DEFAULT_CONFIG)
    # Our own namespace and non-detached actors: on a shared cluster the demo's tools never
    # mix with an agent farm's, and nothing outlives the demo.
    return cfg.model_copy(update={"namespace": f"{cfg.namespace}-demo", "detached": False})


def say(*lines: str) -> None:
    """Print and flush (readable as it happens, in a terminal or a CI log)."""
    for line in lines:
        print(line)
    sys.stdout.flush()


def _call(call_id: str, name: str, **arguments: object) -> ToolCall:
    return ToolCall(call_id, name, json.dumps(arguments))


# ---------------------------------------------------------------- runners
class RayRunner:
    """Runs batches through one scope's executor actor."""

    def __init__(self, handle: ExecutorHandle) -> None:
        self.handle = handle

    async def run(self, batch: ToolBatchInput) -> tuple[ToolBatchResult, list[dict[str, Any]]]:
        """The result and the trace of ``batch``."""
        result = await self.handle.execute_batch(batch)
        return result, list(self.handle.last_trace)

    async def in_flight(self) -> int:
        """Calls currently running on workers."""
        return int((await self.handle.statistics()).in_flight)


class LocalRunner:
    """Runs batches with the in-process ``BatchExecutor`` (no Ray)."""

    def __init__(self, executor: BatchExecutor) -> None:
        self.executor = executor

    async def run(self, batch: ToolBatchInput) -> tuple[ToolBatchResult, list[dict[str, Any]]]:
        """The result and the trace of ``batch``."""
        trace: list[dict[str, Any]] = []
        return await self.executor.execute(batch, trace=trace), trace

    async def in_flight(self) -> int:
        """Calls currently dispatched."""
        return self.executor.stats().in_flight


# ---------------------------------------------------------------- batches
def barrier_calls(ws: Path) -> list[ToolCall]:
    """Reads (a parallel group), one write (an exclusive barrier), reads of what it wrote."""
    return [
        _call("c1", "read_file", path=str(ws / "README.md")),
        _call("c2", "read_file", path=str(ws / "notes.md")),
        _call("c3", "grep", pattern="TODO", root=str(ws)),
        _call("c4", "write_file", path=str(ws / "PLAN.md"), text="TODO: ship the demo\n"),
        _call("c5", "read_file", path=str(ws / "PLAN.md")),
        _call("c6", "grep", pattern="TODO", root=str(ws)),
    ]


def timeout_calls(ws: Path) -> list[ToolCall]:
    """A fetch, a call that ignores its deadline, a read."""
    return [
        _call("c1", "fetch_url", url="https://example.com/", latency_ms=150),
        _call("c2", "stubborn", seconds=30),
        _call("c3", "read_file", path=str(ws / "README.md")),
    ]


def crash_calls(ws: Path) -> list[ToolCall]:
    """Reads and a fetch around a call that kills its worker process."""
    return [
        _call("c1", "read_file", path=str(ws / "notes.md")),
        _call("c2", "fetch_url", url="https://example.com/a", latency_ms=100),
        _call("c3", "crash"),
        _call("c4", "grep", pattern="ray", root=str(ws)),
        _call("c5", "read_file", path=str(ws / "README.md")),
    ]


async def cancel_batch(
    runner: RayRunner | LocalRunner, ws: Path, *, scope: str | None = None, think_s: float = 0.25
) -> tuple[ToolBatchResult, list[dict[str, Any]], float]:
    """Two slow fetches, then a write and a read; the user aborts while the fetches run."""
    ctrl = AbortController()
    calls = [
        _call("c1", "fetch_url", url="https://example.com/slow", latency_ms=5000),
        _call("c2", "fetch_url", url="https://example.org/slower", latency_ms=8000),
        _call("c3", "write_file", path=str(ws / "summary.md"), text="never written\n"),
        _call("c4", "read_file", path=str(ws / "summary.md")),
    ]
    t0 = time.perf_counter()
    task = asyncio.ensure_future(runner.run(ToolBatchInput(calls, ctrl.signal, scope=scope)))
    for _ in range(1500):  # poll (up to 30 s) until both fetches run on workers
        if task.done() or await runner.in_flight() >= 2:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(think_s)  # the user watches them spin for a moment
    ctrl.abort("the user pressed stop")
    pressed = time.perf_counter() - t0
    result, trace = await task
    return result, trace, pressed


# ---------------------------------------------------------------- the session
@dataclass
class DemoSession:
    """A started runtime with the demo kit registered, and its workspace."""

    rt: RayRuntime
    workspace: Path
    runner: RayRunner
    disposers: list[Disposer]


@contextlib.contextmanager
def open_session(cfg: RuntimeConfig, workspace: Path) -> Iterator[DemoSession]:
    """Start Ray (or attach), register the kit and the timeout policy; always shut down."""
    import cloudpickle
    import ray

    from toolray_actors import RayRuntime

    cloudpickle.register_pickle_by_value(_demo_tools)
    _demo_tools.make_workspace(workspace)
    t0 = time.perf_counter()
    ray_was_up = ray.is_initialized()
    try:
        # a fresh embedded Ray unless the config names a cluster: works beside `ray start`
        rt = RayRuntime.start(cfg, address=cfg.address or "local")
    except BaseException:
        if not ray_was_up and ray.is_initialized():  # Ray started, then the registry failed
            ray.shutdown()
        raise
    disposers: list[Disposer] = []
    try:
        say(f"Ray ready in {time.perf_counter() - t0:.1f} s (namespace {cfg.namespace!r})")
        disposers.extend(rt.registry.register(d) for d in _demo_tools.demo_tools())
        disposers.append(TimeoutPolicy().install(rt.registry))
        yield DemoSession(rt, workspace, RayRunner(rt.executor(None)), disposers)
    finally:
        for dispose in reversed(disposers):
            with contextlib.suppress(Exception):
                dispose()
        t1 = time.perf_counter()
        rt.shutdown()
        say(f"Ray shut down in {time.perf_counter() - t1:.1f} s")


# ---------------------------------------------------------------- the demo
def _show(title: str, what: str, result: ToolBatchResult, trace: list[dict[str, Any]]) -> None:
    say("", f"=== {title}", *_wrap(what), "", *render_timeline(trace), "", "  results:")
    say(*render_results(result.results))


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(text, width=96, initial_indent="    ", subsequent_indent="    ")


def _stats_delta(before: RuntimeStats, after: RuntimeStats) -> str:
    fields = ("workers", "kills", "replacements", "child_replacements", "workers_lost")
    parts = [f"{f} {getattr(before, f)} -> {getattr(after, f)}" for f in fields]
    return "  rt.stats(): " + ", ".join(parts)


async def _barrier(s: DemoSession) -> None:
    result, trace = await s.runner.run(
        ToolBatchInput(barrier_calls(s.workspace), AbortController().signal)
    )
    _show(
        "1. parallel group -> exclusive barrier -> parallel group",
        "3 reads run together; write_file (not concurrency-safe) waits for them and runs alone;"
        " the reads after it see what it wrote.",
        result,
        trace,
    )


async def _timeout(s: DemoSession) -> None:
    before = s.rt.stats()
    batch = ToolBatchInput(timeout_calls(s.workspace), AbortController().signal)
    result, trace = await s.runner.run(batch)
    grace = s.rt.config.kill_grace_ms
    killed = (
        "the call's own process (the worker runs on; a fresh process replaces it)"
        if s.rt.config.pool.isolation == "call"
        else "the worker and promotes the spare"
    )
    _show(
        "2. a timeout answered by kill-and-replace",
        f"stubborn blocks in C for 30 s and ignores its signal; at its "
        f"{_demo_tools.STUBBORN_TIMEOUT_MS}ms deadline the ladder forwards the abort, interrupts,"
        f" and after {grace:g}ms kills {killed}.",
        result,
        trace,
    )
    say(_stats_delta(before, await _replaced(s, before)))


async def _replaced(s: DemoSession, before: RuntimeStats) -> RuntimeStats:
    """``rt.stats()`` once the pool has replaced what was killed (in the background)."""
    for _ in range(100):
        stats = s.rt.stats()
        if stats.replacements + stats.child_replacements > (
            before.replacements + before.child_replacements
        ):
            return stats
        await asyncio.sleep(0.05)
    return s.rt.stats()


async def _cancel(s: DemoSession) -> None:
    result, trace, pressed = await cancel_batch(s.runner, s.workspace)
    _show(
        "3. a user cancellation",
        f"the user aborts the batch's AbortController {pressed * 1000:.0f} ms after submitting it,"
        " while both fetches run: they stop (ABORTED); the write and read never start.",
        result,
        trace,
    )


async def _crash(s: DemoSession) -> None:
    before = s.rt.stats()
    batch = ToolBatchInput(crash_calls(s.workspace), AbortController().signal)
    result, trace = await s.runner.run(batch)
    _show(
        "4. a worker crash",
        "crash calls os._exit in its process: that call alone gets WORKER_LOST (never re-run),"
        " a fresh process (or, with shared isolation, worker) replaces it, and the other calls"
        " succeed.",
        result,
        trace,
    )
    say(_stats_delta(before, s.rt.stats()))


def _schema_line(schema: dict[str, Any]) -> str:
    params = schema.get("parameters", {})
    required = set(params.get("required", ()))
    names = [f"{p}{'*' if p in required else ''}" for p in params.get("properties", {})]
    return f"    {schema['name']}({', '.join(names)}) - {schema.get('description') or ''}"


async def _scope(s: DemoSession) -> None:
    scope = s.rt.scope(RESTRICTED_SCOPE)
    s.disposers.append(scope.restrict(deny=["write_file"]))
    global_view = s.rt.registry.schemas(None)
    scoped_view = s.rt.registry.schemas(RESTRICTED_SCOPE)
    hidden = sorted({x["name"] for x in global_view} - {x["name"] for x in scoped_view})
    calls = [
        _call("c1", "read_file", path=str(s.workspace / "PLAN.md")),
        _call("c2", "write_file", path=str(s.workspace / "PLAN.md"), text="overwritten\n"),
        _call("c3", "grep", pattern="ray", root=str(s.workspace)),
    ]
    runner = RayRunner(s.rt.executor(RESTRICTED_SCOPE))
    batch = ToolBatchInput(calls, AbortController().signal, scope=RESTRICTED_SCOPE)
    result, trace = await runner.run(batch)
    say("", "=== 5. a scope whose restriction hides a tool")
    say(
        *_wrap(
            f"scope {RESTRICTED_SCOPE!r} (a read-only agent) restricts deny=['write_file']: "
            "the model never sees the tool, and a call to it anyway is UNKNOWN_TOOL."
        )
    )
    say("", "  schemas, global view:", *map(_schema_line, global_view))
    say(f"  schemas, scope {RESTRICTED_SCOPE!r}:", *map(_schema_line, scoped_view))
    say(f"  hidden in the scope: {', '.join(hidden) or '(none)'}")
    say("", *render_timeline(trace), "", "  results:", *render_results(result.results))


async def _code(s: DemoSession) -> None:
    await code_scene(s, say)


async def _environments(s: DemoSession) -> None:
    await env_scene(s.rt, s.disposers, say)


SCENARIOS: tuple[Callable[[DemoSession], Awaitable[None]], ...] = (
    _barrier,
    _timeout,
    _cancel,
    _crash,
    _scope,
    _code,
    _environments,
)


async def _run_all(s: DemoSession) -> None:
    t0 = time.perf_counter()
    await s.runner.handle.statistics()  # start the executor actor and its worker pool
    cfg = s.rt.config
    say(
        f"executor actor + {cfg.pool.size} workers + {cfg.pool.spare} spare ready in "
        f"{time.perf_counter() - t0:.1f} s; {len(s.rt.registry.names())} tools registered;"
        " TimeoutPolicy installed"
    )
    for scenario in SCENARIOS:
        await scenario(s)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray demo`` (the global ``--config`` picks the runtime config)."""


def run(args: argparse.Namespace) -> int:
    """Run ``toolray demo``."""
    started = time.perf_counter()
    cfg = resolve_config(args.config)  # a bad config fails here, before Ray starts
    say("toolray demo: tool calls of an LLM agent, run on Ray actors", "")
    with (
        tempfile.TemporaryDirectory(prefix="toolray-demo-") as tmp,
        open_session(cfg, Path(tmp)) as session,
    ):
        asyncio.run(_run_all(session))
    say(
        f"done in {time.perf_counter() - started:.1f} s. Next: `toolray trace --out trace.json`"
        " writes batch 1 as a Chrome/Perfetto trace (open it at https://ui.perfetto.dev)."
    )
    return 0
