"""``toolray bench --environments``: its options, its table (each figure beside its target).

The figures come from ``toolray_actors.bench._env_bench`` (every part on a namespace of
its own on an embedded local Ray); ``--json PATH`` also writes the whole report.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from toolray_actors.bench._env_bench import EnvOptions, run_environments

__all__ = ("add_arguments", "env_rows", "main_environments")

Row = tuple[str, str, str, str, bool | None]
"""One figure: ``(what, measured, reference or target, verdict text, met?)``."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``toolray bench --environments`` (``0`` skips a part)."""
    group = parser.add_argument_group("environments (--environments)")
    add = group.add_argument
    add("--environments", action="store_true", help="measure environments against their targets")
    add("--env-rounds", type=int, default=200, help="one-call rounds and opens/4 (default 200)")
    add("--env-forks", type=int, default=20, help="forks per state size (default 20)")
    add("--env-fork-mb", type=int, default=50, help="the large forked state, MB (default 50)")
    add("--env-instances", type=int, default=1000, help="open instances (default 1000)")
    add("--env-state-kb", type=int, default=100, help="their state, KB (default 100)")
    add("--env-parked", type=int, default=10_000, help="instances with parking (default 10000)")
    add("--env-replay", type=int, default=200, help="replayed trajectories (default 200)")


def _options(args: argparse.Namespace) -> EnvOptions:
    return EnvOptions(
        rounds=args.env_rounds,
        forks=args.env_forks,
        fork_mb=args.env_fork_mb,
        instances=args.env_instances,
        state_kb=args.env_state_kb,
        parked=args.env_parked,
        replay_scopes=args.env_replay,
    )


def _num(report: dict[str, object], *path: str) -> float:
    value: object = report
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return float("nan")
        value = value[key]
    return float(value) if isinstance(value, int | float) else float("nan")


def _call(r: dict[str, object]) -> list[Row]:
    env, plain = _num(r, "call", "environment", "p50_ms"), _num(r, "call", "stateless", "p50_ms")
    ratio = _num(r, "call", "ratio")
    what = "a call of an environment's tool, round trip p50"
    return [
        (what, f"{env:.2f} ms", f"stateless {plain:.2f} ms", f"{ratio:.2f}× ≤ 1.2×", ratio <= 1.2)
    ]


def _open(r: dict[str, object]) -> list[Row]:
    p50 = _num(r, "open", "open", "p50_ms")
    return [("open() of a warm definition, p50", f"{p50:.1f} ms", "≤ 5 ms", "", p50 <= 5)]


def _fork(r: dict[str, object]) -> list[Row]:
    big, small = _num(r, "fork", "process_big", "p50_ms"), _num(r, "fork", "process_1kb", "p50_ms")
    copy, mb = _num(r, "fork", "snapshot_big", "p50_ms"), _num(r, "options", "fork_mb")
    return [
        (f'fork="process" of a {mb:.0f} MB state, p50', f"{big:.1f} ms", "≤ 10 ms", "", big <= 10),
        (
            f'fork="process", {mb:.0f} MB / 1 KB state, p50',
            f"{big:.1f} / {small:.1f} ms",
            f'"snapshot" fork of {mb:.0f} MB {copy:.0f} ms',
            f"{big / small:.2f}× ≤ 2×",
            big / small <= 2,
        ),
    ]


def _memory(r: dict[str, object]) -> list[Row]:
    n, kb = _num(r, "memory", "instances"), _num(r, "options", "state_kb")
    budget = 1536 * n / 1000
    rows: list[Row] = []
    floor = _num(r, "memory", "fork_floor_mb")
    for isolation in ("call", "shared"):
        added = _num(r, "memory", isolation, "added_mb")
        what = f'{n:.0f} open instances of a {kb:.0f} KB state, isolation "{isolation}": added'
        each = f"{added / n:.2f} MB each"
        if isolation == "call" and math.isfinite(floor):  # (a report before it: no floor)
            each += f"; an idle fork of a call template alone adds {floor:.2f} MB"
        rows.append((what, f"{added:,.0f} MB (PSS)", f"≤ {budget:,.0f} MB", each, added <= budget))
    return rows


def _parked(r: dict[str, object]) -> list[Row]:
    n, peak = _num(r, "parked", "instances"), _num(r, "parked", "peak_pss_mb")
    intact = _num(r, "parked", "intact")
    what = f"{n:.0f} instances with parking: toolray's processes (PSS) at the peak"
    verdict = f"{intact:.0f} of {n:.0f} states intact"
    return [(what, f"{peak:,.0f} MB", "≤ 2,048 MB", verdict, peak <= 2048 and intact == n)]


def _replay(r: dict[str, object]) -> list[Row]:
    part = r.get("replay")
    same = isinstance(part, dict) and bool(part.get("outcomes_match") and part.get("states_match"))
    scopes, calls = _num(r, "replay", "scopes"), _num(r, "replay", "calls")
    what = f"multi-turn replay with forks, {scopes:.0f} scopes, {calls:.0f} calls"
    measured = f"{_num(r, 'replay', 'toolray_s'):.1f} s"
    return [(what, measured, "plain Python", "identical" if same else "DIFFERENT", same)]


_ROWS = {"call": _call, "open": _open, "fork": _fork, "memory": _memory}
_ROWS |= {"parked": _parked, "replay": _replay}


def env_rows(report: dict[str, object]) -> list[Row]:
    """The table's rows: every measured figure, its reference or target, met or not."""
    return [row for part, rows in _ROWS.items() if part in report for row in rows(report)]


def _print(rows: list[Row]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="environments: each figure beside its reference (toolray bench)")
    for name in ("figure", "measured", "reference / target", "result", "met"):
        table.add_column(name, justify="left" if name == "figure" else "right")
    for what, measured, target, verdict, met in rows:
        mark = "—" if met is None else ("yes" if met else "no")
        table.add_row(what, measured, target, verdict, mark)
    Console().print(table)


def main_environments(args: argparse.Namespace) -> int:
    """``toolray bench --environments``: start Ray, measure every part, print the table."""
    from toolray_actors import RayRuntime
    from toolray_actors._config import load_config

    opts = _options(args)
    opts.check()  # before Ray starts
    base = load_config(args.config)
    owner = RayRuntime.start(
        base.model_copy(update={"namespace": f"{base.namespace}-envs", "detached": False}),
        address=base.address or "local",
    )
    try:
        report = run_environments(owner, opts, say=lambda line: print(line, file=sys.stderr))
    finally:
        owner.shutdown()
    _print(env_rows(report))
    if args.json is not None:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(f"wrote JSON: {args.json}", file=sys.stderr)
    return 0
