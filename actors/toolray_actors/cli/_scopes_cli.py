"""The ``toolray bench --scopes`` command: its options, its tables and its entry point."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from toolray_actors.bench._scopes import ScopesOptions, run_scopes

__all__ = ("add_arguments", "main_scopes", "scopes_table")


def _mode(row: dict[str, Any]) -> str:
    return f"sharded ({row['shards']})" if row.get("shards") else row["mode"]


def scopes_table(report: dict[str, Any]) -> list[Any]:
    """Rich tables: the scopes rows, then the no-op batch against raw Ray."""
    from rich.table import Table

    per = report["options"]["scope_calls"]
    scopes = Table(
        title=f"N new agent scopes on a running namespace, one {per}-call batch each, at once"
    )
    heads = ("mode", "namespace start", "scopes", "calls", "to last result", "calls/s", "again")
    for name in heads:
        scopes.add_column(name, justify="right")
    scopes.add_column("all right", justify="right")
    for name in ("executor actors", "executor RSS"):
        scopes.add_column(name, justify="right")
    for r in report["scopes"]:
        if "skipped" in r:
            scopes.add_row(r["mode"], "—", str(r["scopes"]), "—", "skipped", *["—"] * 5)
            continue
        scopes.add_row(
            _mode(r),
            f"{r['start_s']:.2f} s",
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
