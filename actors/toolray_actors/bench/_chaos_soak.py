"""The chaos campaign's soak figures: every actor's RSS, open files and threads over time."""

from __future__ import annotations

import time
from typing import Any

__all__ = ("drift", "percentile", "sample")


def sample(rt: Any) -> dict[str, Any]:
    """RSS, open files and threads of every live actor of the namespace (same machine)."""
    import psutil

    row: dict[str, Any] = {"at": time.time(), "actors": {}}
    try:
        actors = rt.stats().actors
    except Exception:
        return row
    for a in actors:
        try:
            p = psutil.Process(a.pid)
            row["actors"][f"{a.kind}:{a.name}:{a.pid}"] = (
                p.memory_info().rss,
                p.num_fds(),
                p.num_threads(),
            )
        except psutil.Error:
            continue
    return row


def drift(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Per actor alive in the second and the last sample: RSS / fd / thread growth."""
    if len(samples) < 3:
        return {}
    _, second, *_, final = samples
    first, last = second["actors"], final["actors"]
    common = sorted(set(first) & set(last))
    rss, fds, threads = [], [], []
    for k in common:
        (rss_a, fds_a, threads_a), (rss_b, fds_b, threads_b) = first[k], last[k]
        rss.append((rss_b - rss_a) / 2**20)
        fds.append(fds_b - fds_a)
        threads.append(threads_b - threads_a)
    return {
        "soak_actors": len(common),
        "soak_max_rss_growth_mb": round(max(rss, default=0.0), 1),
        "soak_max_fd_growth": max(fds, default=0),
        "soak_max_thread_growth": max(threads, default=0),
        "soak_samples": len(samples),
    }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]
