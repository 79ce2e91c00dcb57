"""``toolray trace``: a Chrome/Perfetto trace of a batch, or of a durable event log.

Sources (one of):

- default: start Ray like ``toolray demo`` (same config rules, same tool kit) and run one
  of the demo's batches (``--scenario``, default ``barrier``: reads, a write barrier,
  reads; ``code``: one ``run_code`` program whose sub-calls show nested under it); tracks
  are the worker actors;
- ``--in-process``: the same batch on the core ``BatchExecutor``, no Ray (``barrier`` or
  ``cancel``); every call is on one ``in-process`` track, with lanes where calls overlap;
- ``--from-log PATH``: a ``JsonlEventLog`` file; it holds no timings, so time is logical
  (one tick per record, shown as 1 ms; see :func:`toolray_actors.cli._chrome.events_to_trace`)
  and each ``(turn, step)`` batch is a track.

The JSON goes to ``--out`` (default ``trace.json``); open it at https://ui.perfetto.dev or
in ``chrome://tracing``.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
from pathlib import Path
from typing import Any

from toolray import (
    AbortController,
    BatchExecutor,
    TimeoutPolicy,
    ToolBatchInput,
    ToolRegistry,
    read_jsonl,
)
from toolray.code import PythonRuntime

from . import _demo, _demo_tools
from ._chrome import chrome_json, events_to_trace, trace_to_chrome
from ._demo_code import CODE_SCOPE, code_calls
from ._timeline import render_timeline

__all__ = ("add_arguments", "run")

SCENARIOS = ("barrier", "cancel", "timeout", "crash", "code")
IN_PROCESS_SCENARIOS = ("barrier", "cancel", "code")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray trace``."""
    parser.add_argument(
        "--out", default="trace.json", metavar="PATH", help="where to write the trace JSON"
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--from-log", metavar="PATH", help="convert a JSONL event log (logical time)"
    )
    source.add_argument(
        "--in-process", action="store_true", help="run the batch on BatchExecutor, without Ray"
    )
    parser.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="barrier",
        help="which demo batch to run (in-process: barrier or cancel)",
    )


async def _run_scenario(runner: Any, ws: Path, scenario: str) -> list[dict[str, Any]]:
    if scenario == "cancel":
        _, trace, _ = await _demo.cancel_batch(runner, ws)
        return trace
    if scenario == "code":
        batch = ToolBatchInput(code_calls(ws), AbortController().signal, scope=CODE_SCOPE)
        _, trace = await runner.run(batch)
        return list(trace)
    build = {
        "barrier": _demo.barrier_calls,
        "timeout": _demo.timeout_calls,
        "crash": _demo.crash_calls,
    }[scenario]
    _, trace = await runner.run(ToolBatchInput(build(ws), AbortController().signal))
    return list(trace)


def _in_process(scenario: str) -> list[dict[str, Any]]:
    if scenario not in IN_PROCESS_SCENARIOS:
        raise ValueError(
            f"--in-process runs {' or '.join(IN_PROCESS_SCENARIOS)} only: the {scenario} "
            "scenario needs worker processes (drop --in-process)"
        )
    runtime = PythonRuntime(timeout_s=30, warm=0)
    registry = ToolRegistry(code_runtime=runtime)
    for definition in _demo_tools.demo_tools():
        registry.register(definition)
    TimeoutPolicy().install(registry)
    registry.scope(CODE_SCOPE).present_as("code")
    runner = _demo.LocalRunner(BatchExecutor(registry))
    try:
        with tempfile.TemporaryDirectory(prefix="toolray-trace-") as tmp:
            ws = _demo_tools.make_workspace(tmp)
            return asyncio.run(_run_scenario(runner, ws, scenario))
    finally:
        runtime.close()


def _on_ray(config: str | None, scenario: str) -> list[dict[str, Any]]:
    cfg = _demo.resolve_config(config)  # a bad config fails before Ray starts
    with (
        tempfile.TemporaryDirectory(prefix="toolray-trace-") as tmp,
        _demo.open_session(cfg, Path(tmp)) as session,
    ):
        runner = session.runner
        if scenario == "code":
            session.disposers.append(session.rt.scope(CODE_SCOPE).present_as("code"))
            runner = _demo.RayRunner(session.rt.executor(CODE_SCOPE))
        return asyncio.run(_run_scenario(runner, session.workspace, scenario))


def run(args: argparse.Namespace) -> int:
    """Run ``toolray trace``."""
    if args.from_log:
        trace = events_to_trace(read_jsonl(args.from_log))
        doc = trace_to_chrome(
            trace,
            process_name=f"event log {Path(args.from_log).name}",
            clock="logical: one tick (shown as 1 ms) per event-log record",
        )
    elif args.in_process:
        trace = _in_process(args.scenario)
        doc = trace_to_chrome(trace, process_name=f"{args.scenario} batch (in-process)")
    else:
        trace = _on_ray(args.config, args.scenario)
        doc = trace_to_chrome(
            trace, process_name=f"{args.scenario} batch (Ray)", unassigned="not dispatched"
        )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(chrome_json(doc), encoding="utf-8")
    if not args.from_log:
        _demo.say(*render_timeline(trace), "")
    kinds = [e["ph"] for e in doc["traceEvents"]]
    tracks = sum(1 for e in doc["traceEvents"] if e.get("name") == "thread_name") - 1
    _demo.say(
        f"wrote {out}: {kinds.count('X')} calls on {tracks} track(s), "
        f"{kinds.count('i')} barrier/abort instant(s); open it at https://ui.perfetto.dev"
    )
    return 0
