"""``toolray bench``: parallel-group throughput and latency against raw Ray, in one run.

For each worker count and group shape, the same batch runs through toolray
(``ExecutorHandle.execute_batch``: pipeline, scheduler, ordered commits, worker actors) and
through raw Ray (one async driver actor awaiting the same bare calls on as many bare worker
actors, with the same cap and the same barriers; see ``_rawray``), interleaved, after one
untimed warm-up each. Throughput is calls / median wall time (seen from this process);
per-call latency is dispatch → settled, inside the executor (toolray's batch trace) or the
driver actor (raw); a row toolray ran as one chain (its batch went to one worker at once)
says so, and its latency includes each call's wait for its turn. ``ratio`` is toolray / raw
throughput.

Example:
    >>> report = run_bench(runtime, BenchOptions(calls=20, repetitions=1))  # doctest: +SKIP
    >>> report["results"][0]["ratio"]                                       # doctest: +SKIP
    0.74
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolray_actors.bench._rawray import BenchArgs, GroupShape, stages_of

from ._bench_report import machine, plot, table

if TYPE_CHECKING:
    from toolray_actors import RayRuntime
    from toolray_actors.bench._rawray import RawBaseline
    from toolray_actors.driver._executor_handle import ExecutorHandle

__all__ = (
    "BenchOptions",
    "add_arguments",
    "bench_rows",
    "machine",
    "run",
    "run_bench",
    "runtime_with",
    "steps",
    "table",
)

Advance = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchOptions:
    """What ``run_bench`` measures (``workers=()`` means the runtime's own pool size)."""

    calls: int = 300
    workers: tuple[int, ...] = ()
    shapes: tuple[GroupShape, ...] = (GroupShape("safe", None),)
    body: str = "noop"
    sleep_ms: float = 10.0
    cpu_ms: float = 1.0
    repetitions: int = 3
    cap: int | None = None
    json_path: Path | None = None
    png_path: Path | None = None

    def check(self) -> None:
        """Raise ``ValueError`` for options that cannot be measured."""
        if self.calls < 1 or self.repetitions < 1:
            raise ValueError("--calls and --repetitions must be at least 1")
        if self.cap is not None and self.cap < 1:
            raise ValueError("--cap must be a positive integer")
        if self.body not in ("noop", "sleep", "cpu"):
            raise ValueError(f"unknown body {self.body!r}: use noop, sleep or cpu")

    def body_args(self) -> BenchArgs:
        """The arguments every call carries (besides ``exclusive``)."""
        if self.body == "sleep":
            return {"ms": self.sleep_ms}
        if self.body == "cpu":
            return {"ms": self.cpu_ms}
        return {}


# ---------------------------------------------------------------------- measuring
def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def _summary(calls: int, walls: list[float], latencies: list[float]) -> dict[str, Any]:
    median = statistics.median(walls)
    return {
        "calls_per_s": calls / median,
        "wall_ms_median": median * 1000,
        "wall_ms": [w * 1000 for w in walls],
        "p50_ms": _pct(latencies, 0.50),
        "p95_ms": _pct(latencies, 0.95),
        "latency_samples": len(latencies),
    }


def _trace_latencies(trace: list[dict[str, Any]]) -> list[float]:
    return [
        s["settled"] - s["started"]
        for s in trace
        if s.get("type") == "call" and "settled" in s and "started" in s
    ]


class _Side:
    """One configuration's batches on both sides, plus what was measured."""

    def __init__(
        self, handle: ExecutorHandle, raw: RawBaseline, opts: BenchOptions, shape: GroupShape
    ):
        from toolray import ToolCall

        self.handle, self.raw, self.opts = handle, raw, opts
        flags = shape.exclusive_flags(opts.calls)
        args = opts.body_args()
        name = f"bench_{opts.body}"
        self.calls = [
            ToolCall(f"b{i}", name, json.dumps({**args, "exclusive": True} if ex else args))
            for i, ex in enumerate(flags)
        ]
        self.stages = stages_of(flags)
        self.cap = opts.cap or handle.config.max_parallel_tool_calls
        self.walls: dict[str, list[float]] = {"toolray": [], "raw": []}
        self.latencies: dict[str, list[float]] = {"toolray": [], "raw": []}
        self.chained = False

    async def toolray(self, timed: bool) -> None:
        from toolray import AbortController, ToolBatchInput

        batch = ToolBatchInput(
            self.calls,
            AbortController().signal,
            max_parallel_tool_calls=self.cap,
            scope=self.handle.scope,
        )
        start = time.perf_counter()
        result = await self.handle.execute_batch(batch)
        wall = time.perf_counter() - start
        failed = next((r for r in result.results if r.result.is_error), None)
        if failed is not None:
            raise RuntimeError(f"bench batch failed: {failed.result.content}")
        if timed:
            self.walls["toolray"].append(wall)
            self.latencies["toolray"].extend(_trace_latencies(self.handle.last_trace))
            self.chained = any(s.get("chain") for s in self.handle.last_trace)

    async def rawray(self, timed: bool) -> None:
        start = time.perf_counter()
        latencies = await self.raw.run(self.stages, self.cap, self.opts.body, self.opts.body_args())
        wall = time.perf_counter() - start
        if timed:
            self.walls["raw"].append(wall)
            self.latencies["raw"].extend(latencies)

    def row(self, workers: int, shape: GroupShape) -> dict[str, Any]:
        n = len(self.calls)
        ours = _summary(n, self.walls["toolray"], self.latencies["toolray"])
        raw = _summary(n, self.walls["raw"], self.latencies["raw"])
        return {
            "workers": workers,
            "shape": shape.label,
            "chained": self.chained,
            "group_size": shape.group_size(n),
            "calls": n,
            "cap": self.cap,
            "body": self.opts.body,
            "toolray": ours,
            "raw": raw,
            "ratio": ours["calls_per_s"] / raw["calls_per_s"],
        }


@contextmanager
def runtime_with(base: RayRuntime, workers: int) -> Iterator[RayRuntime]:
    """``base`` if its pool has ``workers`` workers, else a sibling namespace that does."""
    if base.config.pool.size == workers:
        yield base
        return
    from toolray_actors import RayRuntime

    cfg = base.config.model_copy(
        update={
            "namespace": f"{base.config.namespace}-w{workers}",
            "detached": False,
            "pool": base.config.pool.model_copy(update={"size": workers}),
        }
    )
    sibling = RayRuntime.start(cfg)  # Ray is up: this only adds the namespace's actors
    try:
        yield sibling
    finally:
        sibling.shutdown()


async def _measure_workers(
    base: RayRuntime, opts: BenchOptions, workers: int, advance: Advance
) -> list[dict[str, Any]]:
    from toolray_actors.bench._rawray import RawBaseline, bench_tool

    rows: list[dict[str, Any]] = []
    with runtime_with(base, workers) as rt:
        key = f"toolray-bench-{uuid.uuid4().hex[:8]}"
        scope = rt.scope(key)
        scope.register(bench_tool(opts.body))
        raw = RawBaseline(workers=workers, threads=rt.config.pool.max_concurrency)
        try:
            await raw.ready()
            for shape in opts.shapes:
                side = _Side(rt.executor(key), raw, opts, shape)
                what = f"{workers} workers, {shape.label}"
                for rep in range(opts.repetitions + 1):
                    await side.toolray(timed=rep > 0)
                    advance(f"{what}: toolray")
                    await side.rawray(timed=rep > 0)
                    advance(f"{what}: raw Ray")
                rows.append(side.row(workers, shape))
        finally:
            raw.close()
            scope.dispose()
    return rows


async def bench_rows(
    runtime: RayRuntime, options: BenchOptions, *, advance: Advance | None = None
) -> list[dict[str, Any]]:
    """One row per (workers, shape): both sides' throughput and latency, and the ratio."""
    step = advance or (lambda what: None)
    rows: list[dict[str, Any]] = []
    for w in options.workers or (runtime.config.pool.size,):
        rows.extend(await _measure_workers(runtime, options, w, step))
    return rows


def run_bench(
    runtime: RayRuntime, options: BenchOptions, *, advance: Advance | None = None
) -> dict[str, Any]:
    """Measure every (workers, shape) pair; write ``json_path``/``png_path``; the report."""
    options.check()
    workers = options.workers or (runtime.config.pool.size,)
    started = time.perf_counter()
    rows = asyncio.run(bench_rows(runtime, options, advance=advance))
    report = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "options": _options_json(options, workers),
        "results": rows,
        "seconds": time.perf_counter() - started,
    }
    if options.json_path is not None:
        options.json_path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if options.png_path is not None:
        plot(report, options.png_path)
    return report


def _options_json(options: BenchOptions, workers: tuple[int, ...]) -> dict[str, Any]:
    data = asdict(options)
    data["workers"] = list(workers)
    data["shapes"] = [s.label for s in options.shapes]
    data["json_path"] = str(options.json_path) if options.json_path else None
    data["png_path"] = str(options.png_path) if options.png_path else None
    return data


def steps(options: BenchOptions, workers: int) -> int:
    """How many batches ``run_bench`` will run (for a progress bar)."""
    return workers * len(options.shapes) * (options.repetitions + 1) * 2


# ---------------------------------------------------------------------- output
def _ints(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,M,…: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"worker counts must be positive: {text!r}")
    return values


def _shapes(text: str) -> tuple[GroupShape, ...]:
    try:
        return tuple(GroupShape.parse(part) for part in text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``toolray bench``."""
    add = parser.add_argument
    add("--calls", type=int, default=300, help="calls per batch (default 300)")
    add(
        "--workers",
        type=_ints,
        default=(1, 2),
        metavar="N[,M…]",
        help="worker-pool sizes to compare (default 1,2)",
    )
    add(
        "--group-shape",
        type=_shapes,
        default=_shapes("safe,mixed:9+1,mixed:3+1"),
        metavar="SHAPE[,…]",
        help="safe | exclusive | mixed:S+X (groups of S safe + X exclusive calls); "
        "default safe,mixed:9+1,mixed:3+1",
    )
    add("--body", choices=("noop", "sleep", "cpu"), default="noop", help="tool body")
    add("--sleep-ms", type=float, default=10.0, help="sleep body duration (default 10)")
    add("--cpu-ms", type=float, default=1.0, help="cpu body duration (default 1)")
    add("--repetitions", type=int, default=3, help="timed runs per configuration (default 3)")
    add("--cap", type=int, default=None, help="max_parallel_tool_calls (default: the config's, 10)")
    add("--json", type=Path, default=None, metavar="PATH", help="write the figures as JSON")
    add("--png", type=Path, default=None, metavar="PATH", help="write a plot (PNG)")
    add("--no-progress", action="store_true", help="no progress bar")


def _options(args: argparse.Namespace) -> BenchOptions:
    return BenchOptions(
        calls=args.calls,
        workers=args.workers,
        shapes=args.group_shape,
        body=args.body,
        sleep_ms=args.sleep_ms,
        cpu_ms=args.cpu_ms,
        repetitions=args.repetitions,
        cap=args.cap,
        json_path=args.json,
        png_path=args.png,
    )


def run(args: argparse.Namespace) -> int:
    """Run ``toolray bench``: start Ray, measure, print the table, write JSON/PNG."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from toolray_actors import RayRuntime
    from toolray_actors._config import load_config

    options = _options(args)
    options.check()  # before Ray starts (so are the outputs: cli._bench_run)
    base = load_config(args.config)
    cfg = base.model_copy(
        update={
            "namespace": f"{base.namespace}-bench",
            "detached": False,
            "pool": base.pool.model_copy(update={"size": next(iter(options.workers), 1)}),
        }
    )
    console = Console(file=sys.stdout)
    if not console.is_terminal:  # a pipe or a file: wide enough for the whole table
        console = Console(file=sys.stdout, width=140)
    show = console.is_terminal and not args.no_progress
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not show,
    )
    with progress:
        task = progress.add_task("starting Ray", total=steps(options, len(options.workers)))
        runtime = RayRuntime.start(cfg, address=cfg.address or "local")
        try:
            report = run_bench(
                runtime,
                options,
                advance=lambda what: progress.update(task, advance=1, description=what),
            )
        finally:
            progress.update(task, description="shutting down")
            runtime.shutdown()
    console.print(table(report))
    console.print(
        f"machine: nproc {report['machine']['nproc']}, Python {report['machine']['python']}, "
        f"Ray {report['machine']['ray']}; {report['seconds']:.1f} s measuring",
        highlight=False,
    )
    for what, path in (("JSON", options.json_path), ("plot", options.png_path)):
        if path is not None:
            console.print(f"wrote {what}: {path}")
    return 0
