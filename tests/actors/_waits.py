"""Bounded waits on what Ray does in the background (replacements, restarts)."""

from __future__ import annotations

import asyncio
from typing import Any


async def stats_when(rt: Any, ready: Any) -> Any:
    """``rt.stats()`` once ``ready(stats)`` holds (bounded: replacements are asynchronous)."""
    for _ in range(200):
        stats = rt.stats()
        if ready(stats):
            return stats
        await asyncio.sleep(0.05)
    raise AssertionError(f"the pool never caught up: {rt.stats()}")
