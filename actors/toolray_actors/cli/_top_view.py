"""``toolray top``'s picture of a namespace: one JSON-ready snapshot, and its tables (pure).

The snapshot has exactly the keys ``namespace``, ``environments`` (instances by state),
``scopes``, ``tools``, ``pools`` and ``actors``; rates (``calls_per_s``) are the calls that
ended in the executors' last few seconds. The tables render it with rich.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from toolray_actors._farm_stats import RATE_WINDOW_S, merge_scopes, merge_tools, total_counts
from toolray_actors.driver._stats_collect import Gathered

__all__ = ("MAX_ROWS", "render", "snapshot")

MAX_ROWS = 20
"""Rows per table in the live view (the busiest first); ``--json`` has them all."""


def _plain(value: Any) -> Any:
    """A record as JSON-ready values (tuples become lists)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def snapshot(found: Gathered) -> dict[str, Any]:
    """The namespace as one JSON-ready object (see the module docstring)."""
    executors = found.executors
    counted = found.counted()  # the exited executors' counts too
    tools, recent = merge_tools(s for st in counted for s in st.tools)
    tool_rows = []
    for tool in tools:
        row = _plain(tool)
        row["calls_per_s"] = round(recent.get(tool.name, 0) / RATE_WINDOW_S, 2)
        tool_rows.append(row)
    scopes = merge_scopes((name, s) for name, st in executors for s in st.scope_calls)
    for row in scopes:
        row["scope"] = row["scope"] or ""
        row["calls_per_s"] = round(row["calls_per_s"], 2)
    pools = [{**_plain(st), "name": name} for name, st in found.pools]
    envs = _plain(total_counts(st.environments for st in counted))
    return {
        "namespace": found.namespace,
        "environments": envs,
        "scopes": scopes,
        "tools": tool_rows,
        "pools": pools,
        "actors": [_plain(a) for a in found.actors],
    }


_POOL_COLUMNS = {
    "workers": "workers",
    "spares": "spares",
    "kills": "kills",
    "deaths": "deaths",
    "replacements": "replacements",
    "children": "call procs",
    "child_kills": "proc kills",
    "child_deaths": "proc deaths",
    "instances": "instances",
}
"""A pool's counters in the table (key → heading): its worker actors, then (with
``isolation="call"``) its call processes."""


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _failures(failures: dict[str, int]) -> str:
    return " ".join(f"{code}:{n}" for code, n in sorted(failures.items())) or "-"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
    return table


def _busiest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranked = sorted(rows, key=lambda r: (-r.get("in_flight", 0), -r.get("calls_per_s", 0)))
    return ranked[:MAX_ROWS]


def render(snap: dict[str, Any]) -> Group:
    """The snapshot as rich tables: scopes, tools, pools, actors."""
    scopes = _table("Scopes", "scope", "calls/s", "in flight", "calls", "failures")
    for r in _busiest(snap["scopes"]):
        scopes.add_row(
            r["scope"] or "(global)",
            f"{r['calls_per_s']:g}",
            str(r["in_flight"]),
            str(r["calls"]),
            str(r["failures"]),
        )
    tools = _table("Tools", "tool", "calls/s", "in flight", "calls", "p50 ms", "p99 ms", "failures")
    for r in _busiest(snap["tools"]):
        tools.add_row(
            r["name"],
            f"{r['calls_per_s']:g}",
            str(r["in_flight"]),
            str(r["calls"]),
            _ms(r["p50_ms"]),
            _ms(r["p99_ms"]),
            _failures(r["failures"]),
        )
    pools = _table("Pools", "pool", "isolation", *_POOL_COLUMNS.values())
    for r in snap["pools"]:
        pools.add_row(
            r["name"].removeprefix("toolray:pool:"),
            str(r.get("isolation", "-")),
            *(str(r.get(k, 0)) for k in _POOL_COLUMNS),
        )
    actors = _table("Actors", "actor", "kind", "pid", "RSS MB", "scopes")
    for r in snap["actors"]:
        actors.add_row(
            r["name"], r["kind"], str(r["pid"]), f"{r['rss_bytes'] / 2**20:.0f}", str(r["scopes"])
        )
    total_rss = sum(r["rss_bytes"] for r in snap["actors"]) / 2**20
    e = snap["environments"]
    head = Text(
        f"toolray top — namespace {snap['namespace']!r}: {len(snap['scopes'])} scope(s), "
        f"{len(snap['tools'])} tool(s), {len(snap['actors'])} actor(s), {total_rss:.0f} MB RSS; "
        f"environments: {e['open']} open, {e['parked']} parked, {e['lost']} lost"
    )
    return Group(head, scopes, tools, pools, actors)
