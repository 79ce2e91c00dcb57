"""Tools of the farm-control Ray tests (shipped by value to the workers)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from toolray import Placement, RateLimit, RetryPolicy, ToolDefinition, tool


def big_tool(name: str, limit: int | None = 1000) -> ToolDefinition:
    @tool(name=name, max_result_bytes=limit)
    def big(n: int) -> str:
        """A long text."""
        return "x" * n

    return big


def dying_tool(
    name: str, folder: str, deaths: int, *, idempotent: bool, placement: Placement | None = None
) -> ToolDefinition:
    """A body that ``os._exit``\\ s its process on its first ``deaths`` attempts."""
    options: dict[str, Any] = {"idempotent": idempotent, "placement": placement}
    if idempotent:
        options["retry"] = RetryPolicy(attempts=3, backoff_ms=20)

    @tool(name=name, **options)
    def dying(key: str) -> str:
        """Dies a few times, then answers."""
        marker = Path(folder) / f"attempts-{key}"
        with open(marker, "a", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        if len(marker.read_text().split()) <= deaths:
            os._exit(1)
        return f"ok {key}"

    return dying


def stamped_tool(
    name: str, folder: str, limit: RateLimit | None, placement: Placement | None = None
) -> ToolDefinition:
    """A body that records its start time (wall clock) in ``<folder>/<name>``."""

    @tool(name=name, concurrency_safe=True, rate_limit=limit, placement=placement)
    def stamped(i: int) -> int:
        """Records when it started."""
        with open(Path(folder) / name, "a", encoding="utf-8") as out:
            out.write(f"{time.time():.6f}\n")
        return i

    return stamped


def starts_of(folder: str, name: str) -> list[float]:
    path = Path(folder) / name
    return [float(x) for x in path.read_text().split()] if path.exists() else []


def attempts_of(folder: str, key: str) -> list[str]:
    """The pids of the attempts ``dying_tool`` recorded for ``key``."""
    return (Path(folder) / f"attempts-{key}").read_text().split()


def gated_tool(name: str, gate: str, placement: Placement) -> ToolDefinition:
    """A body that waits until the file ``gate`` exists (bounded), on ``placement``'s pool."""

    @tool(name=name, concurrency_safe=True, placement=placement)
    def gated(i: int) -> int:
        """Waits for the test's gate."""
        deadline = time.monotonic() + 60
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)  # polling a file another process creates (the gate)
        return i

    return gated
