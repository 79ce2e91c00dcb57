"""The functions ``bench_mcp.py`` serves, the same for toolray and for the peer.

``cpu(ms)`` burns ``ms`` milliseconds of its thread's CPU time (not wall time: under
contention it still does the same work); ``crash()`` kills the process running it.
"""

from __future__ import annotations

import os
import time
from typing import Any


def spin(ms: float) -> int:
    """Burn ``ms`` ms of this thread's CPU; the number of loop rounds it took."""
    end = time.thread_time() + ms / 1000
    rounds = 0
    while time.thread_time() < end:
        for _ in range(200):
            rounds += 1
    return rounds


def die() -> str:
    """Kill this process at once (as a segfault or the OOM killer would)."""
    os._exit(1)


def register(registry: Any) -> None:
    """``toolray serve --tools mcp_bench_tools``: ``cpu`` and ``crash`` in the registry."""
    from toolray import tool

    @tool(concurrency_safe=True)
    def cpu(ms: float) -> int:
        """Burn ``ms`` milliseconds of CPU."""
        return spin(ms)

    @tool(concurrency_safe=True)
    def crash() -> str:
        """Kill the process running this call."""
        return die()

    registry.register(cpu)
    registry.register(crash)
