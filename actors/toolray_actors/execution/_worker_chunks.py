"""How a worker's outcomes travel back: chunks of a coalesced message, as JSON.

The calls of a message settle one by one; those that settle in the same loop tick travel
together, and a wide message's next chunk waits a moment for company (:func:`company`).
A call whose body overran its budget sends its word (``CallOverdue``) in the same stream.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolray.isolation import CallOutcome, aborted, error_data, outcomes_bytes
from toolray_actors._executor_wire import CallOverdue
from toolray_actors._wire import Settled

__all__ = ("MANY", "chunk_json", "company", "entry", "faulted", "outcome_of", "settle_into")

MANY = 8
"""Calls still running in a message that make its next chunk wait a moment for company."""
_CHUNK_STEP_S = 0.002
_CHUNK_STEPS = 10
"""A chunk of a wide message waits at most this many steps for an eighth of its mates."""


def entry(item: tuple[str, asyncio.Task[CallOutcome]] | CallOverdue) -> Settled | CallOverdue:
    """What travels for a queued item: a call's word as it is, a settled task's outcome."""
    return item if isinstance(item, CallOverdue) else outcome_of(*item)


def outcome_of(token: str, task: asyncio.Task[CallOutcome]) -> Settled:
    if task.cancelled():  # cancelled before its body started (the message was abandoned)
        stopped = aborted("the call was cancelled before it started")
        return Settled(token, CallOutcome(status="error", error=stopped))
    err = task.exception()
    if err is not None:  # a fault of the worker itself: this call's failure, not the message's
        return Settled(token, faulted(err))
    return Settled(token, task.result())


def faulted(err: BaseException) -> CallOutcome:
    """A call's outcome when the worker itself failed running it."""
    return CallOutcome(status="error", error=error_data(err))


def chunk_json(chunk: list[Settled | CallOverdue]) -> bytes:
    """A chunk as the executor reads it: each outcome, or ``None`` for a body that overran."""
    return outcomes_bytes(
        [(e.token, e.outcome) if isinstance(e, Settled) else (e.token, None) for e in chunk]
    )


async def company(settled: asyncio.Queue[Any], wanted: int) -> None:
    """Wait (a few milliseconds at most) until ``wanted`` outcomes are ready to travel."""
    for _ in range(_CHUNK_STEPS):
        if settled.qsize() + 1 >= wanted:
            return
        await asyncio.sleep(_CHUNK_STEP_S)


def settle_into(settled: Any, token: str, task: asyncio.Task[Any]) -> None:
    settled.put_nowait((token, task))
