"""Shared rig of the farm-control suites: tools that record their start times, batches."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from toolray import (
    AbortController,
    AbortSignal,
    BatchExecutor,
    LogStep,
    MemoryEventLog,
    RateLimit,
    RetryPolicy,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolDefinition,
    ToolRegistry,
    tool,
)
from toolray.farm import TokenSchedule


def windows_ok(starts: list[float], limit: RateLimit, *, slack: float = 0.0) -> bool:
    """Whether every window ``[s, s + T]`` (T ≥ 1 s, from each start) holds at most
    ``per_second × T + burst`` starts (``slack`` × ``per_second × T`` allowed on top)."""
    ordered = sorted(starts)
    for i, first in enumerate(ordered):
        for j in range(i, len(ordered)):
            span = max(1.0, ordered[j] - first)
            count = j - i + 1
            if count > limit.per_second * span * (1 + slack) + limit.burst + 1e-6:
                return False
    return True


def schedule_starts(limit: RateLimit, asks: list[tuple[float, int]]) -> list[float]:
    """The slots a schedule hands out for ``(time, count)`` requests in time order."""
    schedule = TokenSchedule(limit, asks[0][0] if asks else 0.0)
    slots: list[float] = []
    for now, count in asks:
        slots.extend(schedule.reserve(now, count, float("inf")).slots)
    return slots


def search_tool(starts: list[float], now: Callable[[], float], **options: Any) -> ToolDefinition:
    """A rate-limited ``search`` tool whose body records when it started."""

    @tool(name="search", concurrency_safe=True, **options)
    async def search(query: str) -> str:
        """Search the web."""
        starts.append(now())
        return f"results for {query}"

    return search


def calls(name: str, count: int, args: str = '{"query": "q"}') -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, args) for i in range(count)]


async def run_batch(
    reg: ToolRegistry,
    batch_calls: list[ToolCall],
    signal: AbortSignal | None = None,
    log: MemoryEventLog | None = None,
    trace: list[dict[str, Any]] | None = None,
) -> ToolBatchResult:
    step = LogStep(0, 0, log) if log is not None else None
    batch = ToolBatchInput(
        batch_calls,
        signal if signal is not None else AbortController().signal,
        max_parallel_tool_calls=64,
        scope="agent" if log is not None else None,
        log=step,
    )
    return await BatchExecutor(reg, max_parallel_tool_calls=64).execute(batch, trace=trace)


async def until(condition: Callable[[], bool], what: str) -> None:
    """Yield to the loop until ``condition()`` holds (bounded: a bug fails, never hangs)."""
    for _ in range(100_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never reached: {what}")


def code_of(result: Any) -> str | None:
    info = getattr(getattr(result, "error", None), "info", None)
    return info.code if info is not None else None


RETRY_FAST = RetryPolicy(attempts=3, backoff_ms=10)
