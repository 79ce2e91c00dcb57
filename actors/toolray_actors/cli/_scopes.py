"""``toolray bench --scopes N``: N agent scopes submitting a batch each, at once, per mode.

For each executors mode (``per_scope``, and ``sharded`` with ``--shards`` shards) and each
N, a fresh namespace on the same local Ray: N scopes each submit one ``--scope-calls``-call
batch (default 5) at the same moment, and the figures are the time to the last result,
calls/s, whether every result is right (each call echoes its own text), and the executor
actors with their total RSS (``rt.stats().actors``). The namespace is torn down before the
next one, so each row starts from nothing but Ray itself: per-scope rows include starting
N executor actors, sharded rows starting the shards. Then, per mode, the no-op 1,000-call
batch against raw Ray's per-call fan-out (``bench_rows``: same worker actors, side by side).

Example:
    >>> opts = ScopesOptions(scopes=(30,), repetitions=1)         # doctest: +SKIP
    >>> report = run_scopes(base_runtime, opts, say=print)        # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ._rawray import GroupShape

if TYPE_CHECKING:
    from toolray_actors import RayRuntime

__all__ = (
    "MODES",
    "ScopesOptions",
    "add_arguments",
    "echo_tool",
    "main_scopes",
    "measure_scopes",
    "run_scopes",
    "scopes_table",
)

MODES = ("per_scope", "sharded")

Say = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopesOptions:
    """What ``run_scopes`` measures."""

    scopes: tuple[int, ...]
    modes: tuple[str, ...] = MODES
    shards: int = 2
    scope_calls: int = 5
    per_scope_max: int = 100
    """Per-scope rows above this many scopes are skipped (one ≈ 93 MB actor per scope)."""
    noop_calls: int = 1000
    """Calls of the no-op batch measured against raw Ray per mode (0: skip it)."""
    repetitions: int = 3

    def check(self) -> None:
        """Raise ``ValueError`` for options that cannot be measured."""
        if not self.scopes or min(self.scopes) < 1:
            raise ValueError("--scopes takes positive counts: N or N,M,…")
        if unknown := set(self.modes) - set(MODES):
            raise ValueError(f"unknown executors mode(s) {sorted(unknown)}: use per_scope, sharded")
        if self.shards < 1 or self.scope_calls < 1 or self.repetitions < 1:
            raise ValueError("--shards, --scope-calls and --repetitions must be at least 1")


async def _echo(args: Any, ctx: Any) -> str:
    return str(args.get("text", ""))


def echo_tool() -> Any:
    """``bench_echo``: echoes ``text`` (an async body; each call's result is checked)."""
    from toolray import ToolOutput, define_tool, text_block

    return define_tool(
        name="bench_echo",
        description="toolray bench body: echo text",
        parameters={"text": {"type": "string"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=_echo,
        is_concurrency_safe=lambda a: True,
    )


def _sibling(base: RayRuntime, mode: str, shards: int) -> RayRuntime:
    from toolray_actors import RayRuntime, RuntimeConfig

    data = base.config.model_dump()
    data.update(
        namespace=f"{base.config.namespace}-{mode}-{uuid.uuid4().hex[:6]}",
        detached=False,
        executors={"mode": mode, "shards": shards},
    )
    return RayRuntime.start(RuntimeConfig.model_validate(data))  # Ray is up: attaches


def _text(key: str, j: int) -> str:
    return json.dumps({"text": f"{key}/{j}"})


def _all_right(keys: list[str], results: list[Any], calls: int) -> bool:
    return all(
        len(res.results) == calls
        and all(getattr(r.result, "value", None) == f"{k}/{j}" for j, r in enumerate(res.results))
        for k, res in zip(keys, results, strict=True)
    )


async def measure_scopes(rt: RayRuntime, scopes: int, calls: int) -> dict[str, Any]:
    """``scopes`` scopes submit one ``calls``-call batch each at once, twice; the figures.

    The first round includes starting the executor actors (per scope, or the shards); the
    second runs on them warm.
    """
    from toolray import AbortController, ToolBatchInput, ToolCall

    keys = [f"agent-{i}" for i in range(scopes)]
    batches = [
        ToolBatchInput(
            [ToolCall(f"c{j}", "bench_echo", _text(k, j)) for j in range(calls)],
            AbortController().signal,
            scope=k,
        )
        for k in keys
    ]
    handles = [rt.executor(k) for k in keys]
    walls, right = [], True
    for _ in range(2):  # cold (the namespace's executors start), then again on them
        start = time.perf_counter()
        runs = (h.execute_batch(b) for h, b in zip(handles, batches, strict=True))
        results = await asyncio.gather(*runs)
        walls.append(time.perf_counter() - start)
        right = right and _all_right(keys, results, calls)
    stats = await asyncio.to_thread(rt.stats)
    executors = [a for a in stats.actors if a.kind == "executor"]
    rss = sum(a.rss_bytes for a in executors) / 2**20
    return {
        "mode": rt.config.executors.mode,
        "shards": rt.config.executors.shards if rt.config.executors.mode == "sharded" else None,
        "scopes": scopes,
        "calls": scopes * calls,
        "wall_s": walls[0],
        "calls_per_s": scopes * calls / walls[0],
        "again_s": walls[1],
        "again_calls_per_s": scopes * calls / walls[1],
        "all_right": right,
        "executor_actors": len(executors),
        "executor_rss_mb": rss,
        "hosted_scopes": sum(a.scopes for a in executors),
    }


async def _noop_row(rt: RayRuntime, opts: ScopesOptions) -> dict[str, Any]:
    from ._bench import BenchOptions, bench_rows

    bench = BenchOptions(
        calls=opts.noop_calls,
        shapes=(GroupShape.parse("safe"),),
        cap=opts.noop_calls,
        repetitions=opts.repetitions,
    )
    (row,) = await bench_rows(rt, bench)
    return {"mode": rt.config.executors.mode, **row}


def run_scopes(base: RayRuntime, opts: ScopesOptions, *, say: Say | None = None) -> dict[str, Any]:
    """Every (mode, N) row and, per mode, the no-op batch vs raw Ray; the report."""
    from ._bench import machine

    opts.check()
    tell = say or (lambda what: None)
    rows: list[dict[str, Any]] = []
    noop: list[dict[str, Any]] = []
    started = time.perf_counter()
    for mode in opts.modes:
        for n in opts.scopes:
            if mode == "per_scope" and n > opts.per_scope_max:
                rows.append({"mode": mode, "scopes": n, "skipped": _why_skipped(n, opts)})
                tell(f"{mode}, {n} scopes: skipped")
                continue
            rt = _sibling(base, mode, opts.shards)
            try:
                rt.registry.register(echo_tool())
                rows.append(asyncio.run(measure_scopes(rt, n, opts.scope_calls)))
                tell(f"{mode}, {n} scopes: {rows[-1]['wall_s']:.1f} s")
            finally:
                rt.teardown()
        if opts.noop_calls:
            rt = _sibling(base, mode, opts.shards)
            try:
                noop.append(asyncio.run(_noop_row(rt, opts)))
                ratio = noop[-1]["ratio"]
                tell(f"{mode}, {opts.noop_calls}-call no-op batch: {ratio:.2f}× raw Ray")
            finally:
                rt.teardown()
    return {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "options": asdict(opts),
        "scopes": rows,
        "noop": noop,
        "seconds": time.perf_counter() - started,
    }


def _why_skipped(n: int, opts: ScopesOptions) -> str:
    return (
        f"over --per-scope-max {opts.per_scope_max}: {n} executor actors would need about "
        f"{n * 93 / 1024:.0f} GB and minutes to start on this machine"
    )


def _mode(row: dict[str, Any]) -> str:
    return f"sharded ({row['shards']})" if row.get("shards") else row["mode"]


def scopes_table(report: dict[str, Any]) -> list[Any]:
    """Rich tables: the scopes rows, then the no-op batch against raw Ray."""
    from rich.table import Table

    per = report["options"]["scope_calls"]
    scopes = Table(title=f"N agent scopes, one {per}-call batch each, all at once")
    for name in ("mode", "scopes", "calls", "to last result", "calls/s", "warm again"):
        scopes.add_column(name, justify="right")
    scopes.add_column("all right", justify="right")
    for name in ("executor actors", "executor RSS"):
        scopes.add_column(name, justify="right")
    for r in report["scopes"]:
        if "skipped" in r:
            scopes.add_row(r["mode"], str(r["scopes"]), "—", "skipped", *["—"] * 5)
            continue
        scopes.add_row(
            _mode(r),
            str(r["scopes"]),
            str(r["calls"]),
            f"{r['wall_s']:.2f} s",
            f"{r['calls_per_s']:,.0f}",
            f"{r['again_s']:.2f} s",
            "yes" if r["all_right"] else "NO",
            str(r["executor_actors"]),
            f"{r['executor_rss_mb']:,.0f} MB",
        )
    tables = [scopes]
    if report["noop"]:
        noop = Table(title="no-op batch, cap = calls, vs raw Ray per-call fan-out (same run)")
        for name in ("mode", "workers", "calls", "toolray calls/s", "raw calls/s", "ratio"):
            noop.add_column(name, justify="right")
        for r in report["noop"]:
            noop.add_row(
                r["mode"],
                str(r["workers"]),
                str(r["calls"]),
                f"{r['toolray']['calls_per_s']:,.0f}",
                f"{r['raw']['calls_per_s']:,.0f}",
                f"{r['ratio']:.2f}×",
            )
        tables.append(noop)
    return tables


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or N,M,…: {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"scope counts must be positive: {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``--scopes`` options of ``toolray bench``."""
    add = parser.add_argument
    add(
        "--scopes",
        type=_counts,
        default=None,
        metavar="N[,M…]",
        help="instead: N agent scopes submitting one batch each at once, per executors mode",
    )
    add("--modes", default="per_scope,sharded", help="with --scopes: the modes to compare")
    add("--shards", type=int, default=2, help="with --scopes: shards of the sharded mode")
    add("--scope-calls", type=int, default=5, help="with --scopes: calls per scope's batch")
    add("--per-scope-max", type=int, default=100, help="with --scopes: larger per_scope rows skip")
    add("--noop-calls", type=int, default=1000, help="with --scopes: no-op batch vs raw Ray")


def main_scopes(args: Any) -> int:
    """``toolray bench --scopes N[,M…]``: start Ray, measure every row, print the tables."""
    import sys

    from rich.console import Console

    from toolray_actors import RayRuntime
    from toolray_actors._config import load_config

    opts = ScopesOptions(
        scopes=tuple(args.scopes),
        modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()),
        shards=args.shards,
        scope_calls=args.scope_calls,
        per_scope_max=args.per_scope_max,
        noop_calls=args.noop_calls,
        repetitions=args.repetitions,
    )
    opts.check()  # before Ray starts
    base = load_config(args.config)
    cfg = base.model_copy(update={"namespace": f"{base.namespace}-bench", "detached": False})
    console = Console(file=sys.stdout)
    if not console.is_terminal:
        console = Console(file=sys.stdout, width=140)
    say = None if args.no_progress else (lambda what: print(f"  {what}", file=sys.stderr))
    runtime = RayRuntime.start(cfg, address=cfg.address or "local")
    try:
        report = run_scopes(runtime, opts, say=say)
    finally:
        runtime.shutdown()
    for table in scopes_table(report):
        console.print(table)
    m = report["machine"]
    console.print(
        f"machine: nproc {m['nproc']}, Python {m['python']}, Ray {m['ray']}; "
        f"{report['date']}; {report['seconds']:.0f} s measuring",
        highlight=False,
    )
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        console.print(f"wrote JSON: {args.json}")
    return 0
