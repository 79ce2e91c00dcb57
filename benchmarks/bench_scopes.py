"""Agent scopes per executors mode, from 30 to 100,000 scopes arriving at once.

Run: ``.venv/bin/python benchmarks/bench_scopes.py [--quick] [--no-write]`` (about 7 min;
``--quick`` about 1 min). It starts a local Ray from ``configs/local.toml`` and measures
with ``toolray bench --scopes``'s code (``toolray_actors.bench._scopes``), then writes
``benchmarks/RESULTS-scopes.md``:

- N new agent scopes (30, 100, 300, 1,000) each submit one 5-call batch at the same moment,
  in ``per_scope`` mode (an executor actor per scope; at most 100 of them: each is a
  ~93 MB process) and in ``sharded`` mode (2 shards), then again on the same scopes;
  per mode, the no-op 1,000-call batch against raw Ray's per-call fan-out;
- 10,000 and 100,000 scopes × 2 calls, sharded: the time to the last result, and the RSS
  of the control actors (registry, shards, pool manager) with every scope in flight.

``--quick``: 30 and 300 scopes (per-scope mode only for 30), and 10,000 scopes without the
no-op rows or the 100,000 row.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from toolray_actors import RayRuntime, load_config
from toolray_actors.bench._scopes import ScopesOptions, run_scopes

RESULTS = Path(__file__).with_name("RESULTS-scopes.md")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"
QUICK = "--quick" in sys.argv


def plans() -> list[ScopesOptions]:
    """What one run measures: the 5-call ladder, then the big sharded rows."""
    if QUICK:
        return [
            ScopesOptions(scopes=(30, 300), per_scope_max=30, noop_calls=0, repetitions=1),
            ScopesOptions(
                scopes=(10_000,), modes=("sharded",), scope_calls=2, noop_calls=0, repetitions=1
            ),
        ]
    return [
        ScopesOptions(scopes=(30, 100, 300, 1_000), repetitions=3),
        ScopesOptions(scopes=(10_000,), modes=("sharded",), scope_calls=2, repetitions=1),
        ScopesOptions(scopes=(100_000,), modes=("sharded",), scope_calls=2, noop_calls=0),
    ]


def _row(r: dict[str, Any]) -> str:
    """One (N, mode) row of the table (a skipped row says why)."""
    if "skipped" in r:
        cells = [f"{r['scopes']:,}", r["mode"], f"skipped: {r['skipped']}", *[""] * 10]
    else:
        cells = [
            f"{r['scopes']:,} × {r['calls'] // r['scopes']}",
            r["mode"] + (f" ({r['shards']} shards)" if r.get("shards") else ""),
            f"{r['executor_actors']:,}",
            f"{r['wall_s']:.2f} s",
            f"{r['calls_per_s']:,.0f}",
            f"{r['again_s']:.2f} s",
            f"{r['executor_rss_mb']:,.0f} MB",
            f"{r['rss_per_scope_kb']:,.1f} KB",
            f"{r['control_rss_mb']:,.0f} MB",
            f"{r['start_s']:.1f} s",
            "yes" if r["all_right"] else "**no**",
            f"{r['control_peak_rss_mb']:,.0f} MB",
            f"{r['batches_waited']:,}",
        ]
    return "| " + " | ".join(cells) + " |"


def write(reports: list[dict[str, Any]], seconds: float, load: tuple[float, float]) -> None:
    """``RESULTS-scopes.md``: one table of every (N, mode) row, one of the no-op batches."""
    rows = [r for report in reports for r in report["scopes"]]
    noop = [r for report in reports for r in report["noop"]]
    m = reports[0]["machine"]
    text = [
        "# Agent scopes per executors mode (`benchmarks/bench_scopes.py`)",
        "",
        f"`benchmarks/bench_scopes.py{' --quick' if QUICK else ''}`: one run, {seconds:.0f} s, "
        f"{reports[0]['date']}; a local Ray from `configs/local.toml`; nproc {m['nproc']}, "
        f"Python {m['python']}, Ray {m['ray']}; 1-minute load average {load[0]:.1f} at the "
        f"start, {load[1]:.1f} at the end (other sessions may share the machine).",
        "",
        "N new agent scopes arrive at a running namespace and each submits one batch at the "
        "same moment (every call echoes its own text, so every result is checked), then "
        "again on the same scopes (executors warm). The executor actors are those serving "
        "the scopes (per-scope mode starts one per scope, inside the timed window); the "
        "control actors are the registry, the executors and the pool manager. Per scope: "
        "the executors' RSS growth over the run, divided by N. Peak: the control actors' "
        "summed RSS sampled every 0.2 s during both rounds. Waited: batches the driver held "
        "back (at most `[executors] max_batches_in_flight` = 256 of its batches in flight on "
        "one executor actor).",
        "",
        "| scopes × calls | mode | executor actors | time to the last result | calls/s | "
        "again (warm) | executor RSS | per scope | control actors' RSS | namespace start | "
        "every result right | control actors' peak RSS | batches that waited |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
        *(_row(r) for r in rows),
        "",
        "Targets (10,000 scopes × 2 calls, sharded): the last result ≤ 15 s, the control "
        "actors' RSS ≤ 1 GB; 100,000 scopes × 2 calls, sharded: the last result ≤ 90 s, the "
        "control actors' peak RSS ≤ 2.5 GB.",
    ]
    if noop:
        text += [
            "",
            "No-op batch against raw Ray's per-call fan-out, per mode (same worker actors, "
            "side by side):",
            "",
            "| mode | calls | toolray calls/s | raw Ray calls/s | toolray / raw |",
            "|---|---:|---:|---:|---:|",
            *(
                f"| {r['mode']} | {r['calls']:,} | {r['toolray']['calls_per_s']:,.0f} | "
                f"{r['raw']['calls_per_s']:,.0f} | {r['ratio']:.2f}× |"
                for r in noop
            ),
        ]
    RESULTS.write_text("\n".join(text) + "\n", encoding="utf-8")


def main() -> None:
    import os

    started, load = time.perf_counter(), os.getloadavg()[0]
    base = load_config(str(CONFIG))
    cfg = base.model_copy(update={"namespace": f"{base.namespace}-bench", "detached": False})
    runtime = RayRuntime.start(cfg, address=cfg.address or "local")
    reports = []
    try:
        for opts in plans():
            reports.append(run_scopes(runtime, opts, say=lambda what: print(f"  {what}")))
    finally:
        runtime.shutdown()
    for report in reports:
        for r in report["scopes"]:
            print(_row(r))
    if "--no-write" not in sys.argv:
        write(reports, time.perf_counter() - started, (load, os.getloadavg()[0]))
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
