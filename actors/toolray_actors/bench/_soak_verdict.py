"""The soak's samples and verdicts (``benchmarks/soak.py``): what grew, and whether it may.

A *sample* reads every live actor of the namespace (``rt.stats().actors``) and, with psutil
on this machine, its RSS, open files, threads and the processes it runs (itself and every
descendant: call processes, environment instances, Code Mode children); the namespace's
process count is the union of them all.

The load rests twice — after the *baseline mark* (``max(60 s, T / 12)`` of load: 5 minutes
of an hour) and after the whole run — for :data:`REST_S` seconds: every batch in flight
ends, environment instances park. Then a 12-call batch wakes the workers (a worker lets its
call processes idle for 60 s beyond the warm ones go when it next releases one; a worker
that goes quiet keeps them until then), and the sample that follows is *at rest*. The
verdicts (:func:`verdicts`) compare the two at-rest samples, ``mark`` and ``end``, so the
other sessions' load on this machine (calls that wait longer hold more processes for a
while) does not pass for growth:

- a *long-lived* actor is one alive (same kind, name and pid) in both;
- **RSS**: each long-lived actor's RSS at ``end`` is at most 5 % above its RSS at ``mark``;
- **open files, threads** (per long-lived actor) and **processes** (the namespace's) are
  *flat*: at ``end`` at most :data:`SLACK` above ``mark`` (2 each: a connection or a thread
  a moment's work holds);
- **lost**: no call without a result (a batch that raised, an id missing), no environment
  step gone wrong (a handle's verb that raised, a silent reset, a lost update, a fork that
  started elsewhere), no instance lost (nothing here kills one);
- **leftover**: every process of the run (the embedded Ray's, the actors', their children)
  is gone within 30 s of the shutdown.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from toolray_actors.bench._soak_load import Json

if TYPE_CHECKING:
    from toolray_actors.driver._runtime import RayRuntime

__all__ = ("REST_S", "SLACK", "descendants", "leftover", "sample", "verdicts")

SLACK = {"fds": 2, "threads": 2, "processes": 2}
REST_S = 70.0
"""How long each rest lasts (idle call processes exit after 60 s)."""
RSS_PCT = 5.0
MB = 2**20


def descendants(pid: int) -> set[tuple[int, float]]:
    """``pid`` and every process under it, as (pid, create time) — a pid may be reused."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return set()
    out = set()
    for p in tree:
        try:
            out.add((p.pid, p.create_time()))
        except psutil.Error:
            continue
    return out


def sample(rt: RayRuntime, t0: float) -> Json:
    """One sample: every actor's RSS / open files / threads / processes, the namespace's."""
    import psutil

    stats = rt.stats()
    row: Json = {"t": round(time.monotonic() - t0, 1), "actors": {}}
    procs: set[tuple[int, float]] = set()
    for a in stats.actors:
        try:
            p = psutil.Process(a.pid)
            with p.oneshot():
                rss, fds, threads = p.memory_info().rss, p.num_fds(), p.num_threads()
        except psutil.Error:
            continue
        tree = descendants(a.pid)
        procs |= tree
        row["actors"][f"{a.kind}:{a.name}:{a.pid}"] = {
            "kind": a.kind,
            "rss": rss,
            "fds": fds,
            "threads": threads,
            "processes": len(tree),
        }
    row["processes"] = len(procs)
    row["call_processes"] = sum(p.children for p in stats.pools)
    row["instance_processes"] = sum(len(p.instance_pids) for p in stats.pools)
    row["environments"] = asdict(stats.environments)
    one_minute, _, _ = psutil.getloadavg()
    row["load"] = round(one_minute, 1)
    return row


def leftover(pids: set[tuple[int, float]], grace_s: float = 30.0) -> list[int]:
    """The processes of ``pids`` still alive ``grace_s`` after the shutdown (polled)."""
    import psutil

    def alive() -> list[int]:
        out = []
        for pid, created in sorted(pids):
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(pid)
            except psutil.Error:
                continue
        return out

    deadline = time.monotonic() + grace_s
    while (left := alive()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def verdicts(samples: list[Json], counts: Json, left: list[int]) -> Json:
    """Every criterion: its figures, its target, ``met``."""
    at = {s["rest"]: s for s in samples if s.get("rest")}
    if "mark" not in at or "end" not in at:
        raise ValueError("no at-rest sample at the mark and at the end")
    mark, end = at["mark"], at["end"]
    first, last = mark["actors"], end["actors"]
    lived = sorted(set(first) & set(last))
    actors = []
    for key in lived:
        a, b = first[key], last[key]
        actors.append(
            {
                "actor": key,
                "kind": a["kind"],
                "rss_mark_mb": round(a["rss"] / MB, 1),
                "rss_end_mb": round(b["rss"] / MB, 1),
                "rss_growth_pct": round(100 * (b["rss"] / a["rss"] - 1), 2),
                "fds": [a["fds"], b["fds"]],
                "threads": [a["threads"], b["threads"]],
            }
        )
    worst = max(actors, key=lambda r: r["rss_growth_pct"], default=None)
    out: Json = {
        "mark_s": mark["t"],
        "end_s": end["t"],
        "long_lived_actors": len(actors),
        "actors": actors,
        "rss": {
            "target_pct": RSS_PCT,
            "max_growth_pct": worst["rss_growth_pct"] if worst else None,
            "worst": worst["actor"] if worst else None,
            "met": bool(actors) and all(r["rss_growth_pct"] <= RSS_PCT for r in actors),
        },
    }
    for what in ("fds", "threads"):
        growth = [end - mark for mark, end in (r[what] for r in actors)]
        out[what] = {
            "slack": SLACK[what],
            "max_growth": max(growth, default=0),
            "met": bool(actors) and all(g <= SLACK[what] for g in growth),
        }
    loaded = [s["processes"] for s in samples if s["phase"] == "load"]
    out["processes"] = {
        "slack": SLACK["processes"],
        "mark": mark["processes"],
        "end": end["processes"],
        "growth": end["processes"] - mark["processes"],
        "under_load_max": max(loaded, default=0),
        "met": end["processes"] <= mark["processes"] + SLACK["processes"],
    }
    lost_instances = counts["env"].get("lost_instances", 0)
    out["lost"] = {
        "calls": counts["lost"],
        "instances": lost_instances,
        "met": counts["lost"] == 0 and lost_instances == 0,
    }
    out["leftover"] = {"processes": len(left), "pids": left[:20], "met": not left}
    criteria = ("rss", "fds", "threads", "processes", "lost", "leftover")
    out["met"] = all(out[k]["met"] for k in criteria)
    return out
