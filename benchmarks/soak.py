"""Soak: a mixed load for N minutes; every long-lived actor's RSS, files, threads, processes.

The load (``toolray_actors.bench._soak_load``): rollouts whose tools hang and crash, in
scopes created and disposed per trajectory; environments opened, forked, parked, closed;
Code Mode programs; a rate-limited tool; scope churn — on an embedded local Ray, sharded
executors (2 shards). Every ``--sample-s`` seconds it reads each actor's RSS, open files,
threads and processes and the namespace's process count; at the end it judges the curves
(``toolray_actors.bench._soak_verdict``: RSS within +5 % of the baseline mark's — 5 minutes
of an hour, ``max(1 min, T/12)`` for a shorter run — files, threads and processes flat,
lost 0, leftover processes 0 after the shutdown) and writes a JSON, a results file and a
chart of the RSS curves.

Usage: ``python benchmarks/soak.py --minutes 60 --write`` (the committed figures:
``soak-60min.json``, ``RESULTS-soak.md``, ``docs/assets/soak.svg``), or ``--minutes 1
--json out.json`` (the test suite's quick variant); ``--chart-from JSON --chart SVG``
redraws a chart. The exit status is 0 when every criterion held.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from toolray_actors import RayRuntime, RuntimeConfig
from toolray_actors.bench._soak_load import LANES, Book, register, run_lanes, wake
from toolray_actors.bench._soak_verdict import (
    REST_S,
    SLACK,
    descendants,
    leftover,
    sample,
    verdicts,
)
from toolray_actors.driver._ray_init import StartError

Proc = tuple[int, float]
"""A process: its pid and its creation time."""
WAKE_SETTLE_S = 3.0
"""After the wake-up batch, before the at-rest sample (the trimmed processes exit)."""
HERE = Path(__file__).resolve().parent
CHART = HERE.parent / "docs" / "assets" / "soak.svg"
CONFIG = {
    "namespace": "toolray-soak",
    "kill_grace_ms": 300,
    "cancel_grace_ms": 100,
    "detached": False,
    "ray": {"include_dashboard": False, "log_to_driver": False},
    "pool": {"size": 2, "spare": 1, "max_concurrency": 64},
    "executors": {"mode": "sharded", "shards": 2},
    "code": {"size": 1, "timeout_s": 20},
}


async def soak(minutes: float, sample_s: float, mark: float, rest_s: float) -> dict[str, Any]:
    """Run the load for ``minutes`` (resting at the mark and at the end); samples, verdicts."""
    seconds = minutes * 60
    rt, stale = _start(RuntimeConfig.model_validate(CONFIG))
    ran: set[Proc] = set()
    samples: list[dict[str, Any]] = []
    book = Book()
    gate, stop = asyncio.Event(), asyncio.Event()
    gate.set()
    t0 = time.monotonic()

    async def phase(name: str, duration: float) -> None:
        """Sample every ``sample_s`` for ``duration``; the last one at its end."""
        end = time.monotonic() + duration
        while True:
            left_s = end - time.monotonic()
            if left_s > 0.5:
                await asyncio.sleep(min(sample_s, left_s))
                if end - time.monotonic() > 0.5:
                    _take(rt, t0, book, samples, ran, name)
                    continue
            _take(rt, t0, book, samples, ran, name)
            return

    try:
        register(rt)
        lanes = asyncio.ensure_future(run_lanes(rt, book, gate, stop))
        _take(rt, t0, book, samples, ran, "load")
        await phase("load", mark)
        gate.clear()  # rest: batches in flight end, idle call processes go
        await phase("rest", rest_s)
        await _woken(rt, t0, book, samples, ran, "mark")
        gate.set()
        await phase("load", seconds - mark)
        stop.set()
        await asyncio.wait_for(lanes, timeout=120)
        await phase("rest", rest_s)
        await _woken(rt, t0, book, samples, ran, "end")
    finally:
        rt.shutdown()
    left = leftover(ran - stale - {(os.getpid(), _created(os.getpid()))})
    counts = book.snapshot()
    return {
        "minutes": minutes,
        "sample_s": sample_s,
        "mark_s": mark,
        "rest_s": rest_s,
        "lanes": LANES,
        "slack": SLACK,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "processes_seen": len(ran - stale),
        "failed_start_processes": len(stale),
        "counts": counts,
        "verdicts": verdicts(samples, counts, left),
        "samples": samples,
    }


def _start(config: RuntimeConfig, attempts: int = 4) -> tuple[RayRuntime, set[Proc]]:
    """An embedded Ray (tried again when this shared machine is too busy for it to start),
    and the processes a failed attempt left (Ray's own, not the run's: not judged)."""
    import ray

    for attempt in range(1, attempts + 1):
        stale = descendants(os.getpid()) - {(os.getpid(), _created(os.getpid()))}
        try:
            return RayRuntime.start(config, address="local"), stale
        except StartError as err:
            if attempt == attempts:
                raise
            print(f"Ray did not start ({str(err)[:120]}); trying again", flush=True)
            ray.shutdown()
            leftover(descendants(os.getpid()) - stale, grace_s=60)
    raise AssertionError("unreachable")


async def _woken(
    rt: RayRuntime,
    t0: float,
    book: Book,
    samples: list[dict[str, Any]],
    ran: set[Proc],
    rest: str,
) -> None:
    """The at-rest sample: after a wake-up batch (idle call processes trimmed), settled."""
    await wake(rt, book, len(samples))
    await asyncio.sleep(WAKE_SETTLE_S)
    _take(rt, t0, book, samples, ran, "rest")
    samples[-1]["rest"] = rest


def _take(
    rt: RayRuntime,
    t0: float,
    book: Book,
    samples: list[dict[str, Any]],
    ran: set[Proc],
    phase: str,
) -> None:
    row = sample(rt, t0)
    row["phase"] = phase
    row["calls"] = {k: book.snapshot()[k] for k in ("calls", "ok", "failed", "lost")}
    samples.append(row)
    ran |= descendants(os.getpid())
    print(_line(row), flush=True)


def _created(pid: int) -> float:
    import psutil

    return float(psutil.Process(pid).create_time())


def _line(row: dict[str, Any]) -> str:
    rss = sum(a["rss"] for a in row["actors"].values()) / 2**20
    calls = row["calls"]
    return (
        f"t={row['t']:>7.1f}s {row['phase']:<4} actors={len(row['actors'])} rss={rss:,.0f}MB "
        f"processes={row['processes']} (call {row['call_processes']}) "
        f"calls={calls['calls']:,} ok={calls['ok']:,} "
        f"failed={calls['failed']:,} lost={calls['lost']} load={row['load']}"
    )


def results(out: dict[str, Any]) -> str:
    """``RESULTS-soak.md``: the criteria, per lane, per actor."""
    v, c, env = out["verdicts"], out["counts"], out["counts"]["env"]
    yes = {True: "yes", False: "**NO**"}
    loads = [s["load"] for s in out["samples"]]
    p = v["processes"]
    rest = f"at rest after {out['mark_s'] / 60:g} min of load vs at rest after the run"
    lines = [
        f"# Soak: {out['minutes']:g} minutes under a mixed load",
        "",
        f"`python benchmarks/soak.py --minutes {out['minutes']:g}`, {out['date']}, "
        f"{out['machine']}; 1-minute load average {min(loads)}–{max(loads)} (other "
        f"sessions share this machine). {len(out['samples'])} samples, every "
        f"{out['sample_s']:g} s; the load rests {out['rest_s']:g} s at its baseline mark "
        "and at its end, and the criteria compare the two samples at rest. Method: "
        "`benchmarks/soak.py`; criteria: `toolray_actors/bench/_soak_verdict.py`.",
        "",
        "| criterion | measured | target | met |",
        "|---|---:|---|:---:|",
        f"| RSS growth of each long-lived actor ({v['long_lived_actors']}), {rest} "
        f"| max {v['rss']['max_growth_pct']:+.2f} % | ≤ 5 % | {yes[v['rss']['met']]} |",
        f"| open files of each long-lived actor, {rest} | {_growth(v['fds']['max_growth'])} "
        f"| ≤ +{v['fds']['slack']} | {yes[v['fds']['met']]} |",
        f"| threads of each long-lived actor, {rest} | {_growth(v['threads']['max_growth'])} "
        f"| ≤ +{v['threads']['slack']} | {yes[v['threads']['met']]} |",
        f"| processes of the namespace ({p['mark']} → {p['end']}), {rest} "
        f"| {_growth(p['growth'])} | ≤ +{p['slack']} | {yes[p['met']]} |",
        f"| calls lost / environment instances lost | {v['lost']['calls']} / "
        f"{v['lost']['instances']} | 0 | {yes[v['lost']['met']]} |",
        f"| leftover processes 30 s after the shutdown (of {out['processes_seen']} seen) "
        f"| {v['leftover']['processes']} | 0 | {yes[v['leftover']['met']]} |",
        "",
        f"Under load the namespace ran up to {p['under_load_max']} processes (call processes "
        "fork while calls wait and exit after 60 s idle). Calls: "
        f"{c['calls']:,} — {c['ok']:,} ok, {c['failed']:,} failed with a code "
        f"({c['unexpected']:,} of them a code their lane's own faults do not explain), "
        f"{c['lost']} lost (a batch that raised, a result missing, an environment step "
        "gone wrong). "
        f"Environments: {env.get('opened', 0):,} opened, {env.get('forked', 0):,} "
        f"forked, {env.get('parked_seen', 0):,} seen parked after an idle pause (restored "
        f"by their next call), {env.get('closed', 0):,} closed; "
        f"{env.get('scopes_disposed', 0):,} scopes created and disposed. Rollout calls "
        f"planned: {env.get('rollout_good', 0):,} good, {env.get('rollout_hang', 0):,} "
        f"hanging, {env.get('rollout_crash', 0):,} crashing.",
        "",
        "| lane | agents | ok | failed (by code) | lost |",
        "|---|---:|---:|---|---:|",
    ]
    for lane, agents in out["lanes"].items():
        codes = ", ".join(f"{n:,} {k}" for k, n in c["failed_by_lane"].get(lane, {}).items())
        lines.append(
            f"| {lane} | {agents} | {c['ok_by_lane'].get(lane, 0):,} | {codes or '-'} "
            f"| {c['lost_by_lane'].get(lane, 0)} |"
        )
    lines += [
        "",
        "| long-lived actor | RSS at the mark | RSS at the end | growth | open files | threads |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for a in v["actors"]:
        kind, name = _names(a["actor"])
        lines.append(
            f"| {kind} `{name}` | {a['rss_mark_mb']} MB | {a['rss_end_mb']} MB "
            f"| {a['rss_growth_pct']:+.2f} % | {a['fds'][0]} → {a['fds'][1]} "
            f"| {a['threads'][0]} → {a['threads'][1]} |"
        )
    lines += ["", "![RSS of every long-lived actor over the run](../docs/assets/soak.svg)", ""]
    return "\n".join(lines)


def _names(key: str) -> tuple[str, str]:
    """An actor's kind and short name from its sample key (``kind:name:pid``)."""
    kind, rest = key.split(":", 1)
    name, pid = rest.rsplit(":", 1)
    name = name.removeprefix("toolray:").removeprefix(f"{kind}:")
    return kind, name if kind != "worker" else f"pid {pid}"


def _growth(n: float) -> str:
    """A growth as the results table shows it (``run_all`` reads the number)."""
    return f"{n:+g}" if n > 0 else "no growth"


def chart(out: dict[str, Any], path: Path) -> None:
    """The RSS curve of every long-lived actor; the namespace's processes, call processes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    v, samples = out["verdicts"], out["samples"]
    plt.rcParams["svg.fonttype"] = "none"
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.2]}
    )
    for a in v["actors"]:
        key = a["actor"]
        xs = [s["t"] / 60 for s in samples if key in s["actors"]]
        ys = [s["actors"][key]["rss"] / 2**20 for s in samples if key in s["actors"]]
        kind, name = _names(key)
        top.plot(xs, ys, linewidth=1.2, label=f"{kind} {name} ({a['rss_growth_pct']:+.1f} %)")
    for ax in (top, bottom):
        for s in samples:
            if s.get("rest"):
                ax.axvspan((s["t"] - out["rest_s"]) / 60, s["t"] / 60, color="0.92")
    top.set_ylabel("RSS (MB)")
    top.legend(fontsize=7, ncol=2, loc="lower right")
    met = "every criterion met" if v["met"] else "a criterion MISSED"
    top.set_title(
        f"toolray soak: {out['minutes']:g} minutes under a mixed load, {met}\n"
        f"RSS growth between the rests (grey) at most {v['rss']['max_growth_pct']:+.2f} % "
        f"(target ≤ 5 %); {out['counts']['calls']:,} calls, {out['counts']['lost']} lost",
        fontsize=10,
    )
    ts = [s["t"] / 60 for s in samples]
    bottom.plot(ts, [s["processes"] for s in samples], color="black", label="namespace")
    bottom.plot(ts, [s["call_processes"] for s in samples], color="0.5", label="call processes")
    bottom.legend(fontsize=7, loc="upper left")
    bottom.set_ylabel("processes")
    bottom.set_xlabel("minutes")
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Date": None} if path.suffix == ".svg" else None)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--sample-s", type=float, default=None,
                        help="seconds between samples (default: the run / 120, 5–30)")  # fmt: skip
    parser.add_argument("--mark-s", type=float, default=None,
                        help="load before the first rest, s (default max(60, run/12))")  # fmt: skip
    parser.add_argument("--rest-s", type=float, default=REST_S,
                        help=f"seconds of each rest (default {REST_S:g})")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, help="write the JSON here")
    parser.add_argument("--results", type=Path, default=None, help="write RESULTS-soak.md")
    parser.add_argument("--chart", type=Path, default=None, help="draw the chart (SVG/PNG)")
    parser.add_argument("--write", action="store_true",
                        help="--json soak-<N>min.json --results RESULTS-soak.md --chart "
                        "docs/assets/soak.svg")  # fmt: skip
    parser.add_argument("--chart-from", type=Path, default=None,
                        help="draw --chart and --results from a JSON; run nothing")  # fmt: skip
    args = parser.parse_args(argv)
    if args.write:
        args.json = args.json or HERE / f"soak-{args.minutes:g}min.json"
        args.results = args.results or HERE / "RESULTS-soak.md"
        args.chart = args.chart or CHART
    if args.chart_from:
        out = json.loads(args.chart_from.read_text(encoding="utf-8"))
    else:
        sample_s = args.sample_s or min(30.0, max(5.0, args.minutes * 60 / 120))
        mark = args.mark_s or max(60.0, args.minutes * 60 / 12)
        if not 0 < mark < args.minutes * 60:
            parser.error("the mark must fall inside the run (--mark-s, --minutes)")
        out = asyncio.run(soak(args.minutes, sample_s, mark, args.rest_s))
        if args.json:
            args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    if args.results:
        args.results.write_text(results(out), encoding="utf-8")
    if args.chart:
        chart(out, args.chart)
    print(json.dumps({k: v for k, v in out["verdicts"].items() if k != "actors"}, indent=1))
    print(json.dumps({k: v for k, v in out["counts"].items() if k != "raised"}, indent=1))
    return 0 if out["verdicts"]["met"] else 1


if __name__ == "__main__":
    sys.exit(main())
