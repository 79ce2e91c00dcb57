"""Batch deadlines: a budget for the whole batch, and a body no longer awaited past it.

A batch's ``deadline_s`` (``ToolBatchInput(deadline_s=...)``, ``execute(..., deadline_s=)``)
counts from its submission. :func:`with_deadline` fuses the caller's signal with a timer
that fires a :class:`~toolray._signals.DeadlineReason` when the budget runs out, so every
checkpoint that sees an abort sees this one: calls not started end
``DEADLINE_EXCEEDED`` without running, running bodies get their signal, and the pipeline
turns the aborts the deadline caused into ``DEADLINE_EXCEEDED`` (``past_deadline``).

A deadline is a promise of when the batch returns, which a user's abort is not. So an
in-process body still running ``grace_s`` after the deadline is no longer awaited
(:func:`within_grace`): an async body's task is cancelled, a sync body's thread — which
nothing can stop in-process — is left to finish on its own, its value discarded. The Ray
layer gets the same bound from its cancellation ladder (interrupt, then kill after
``kill_grace_ms``).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable
from typing import Any, TypeVar

from toolray._clock import Clock
from toolray._signals import AbortSignal, DeadlineReason, detach_sources, fire_after
from toolray.errors import AbortError

__all__ = (
    "DEFAULT_KILL_GRACE_MS",
    "Deadline",
    "check_deadline",
    "check_grace",
    "with_deadline",
    "within_grace",
)

DEFAULT_KILL_GRACE_MS = 300.0
"""How long an in-process body may run past its batch's deadline before it is abandoned."""

_T = TypeVar("_T")


def check_deadline(value: Any, what: str = "deadline_s") -> float | None:
    """``None``, or a finite number of seconds ``>= 0`` (``TypeError`` / ``ValueError``).

    Example:
        >>> check_deadline(2), check_deadline(None)
        (2.0, None)
        >>> check_deadline(-1)
        Traceback (most recent call last):
        ...
        ValueError: deadline_s must be a finite number of seconds >= 0, not -1
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = type(value).__name__
        raise TypeError(f"{what} must be a number of seconds or None, not {kind}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of seconds >= 0, not {value!r}")
    return float(value)


def check_grace(value: object, what: str = "kill_grace_ms") -> float:
    """A finite number of milliseconds ``>= 0``, or ``TypeError`` / ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of milliseconds, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite number of milliseconds >= 0, not {value!r}")
    return float(value)


class Deadline:
    """A batch's deadline: the fused signal its calls run under, and the timer's own."""

    __slots__ = ("signal", "timer")

    def __init__(self, signal: AbortSignal, timer: AbortSignal | None) -> None:
        self.signal = signal
        """The caller's signal fused with the deadline (the caller's when there is none)."""
        self.timer = timer
        """Fires with a ``DeadlineReason`` once the budget ran out (``None``: no deadline)."""

    def release(self) -> None:
        """The batch ended: stop the timer and let go of the caller's signal."""
        if self.timer is not None:
            detach_sources(self.timer)
            detach_sources(self.signal)


def with_deadline(
    signal: AbortSignal, deadline_s: float | None, *, grace_ms: float, clock: Clock | None
) -> Deadline:
    """``signal`` fused with a deadline ``deadline_s`` from now (``None``: no deadline)."""
    if deadline_s is None:
        return Deadline(signal, None)
    reason = DeadlineReason(deadline_s=deadline_s, grace_s=grace_ms / 1000.0)
    if deadline_s <= 0:
        timer = AbortSignal.aborted_with(reason)
    else:
        timer = fire_after(deadline_s, reason, clock=clock)
    return Deadline(AbortSignal.any([signal, timer]), timer)


async def within_grace(body: Awaitable[_T], deadline: AbortSignal, clock: Clock) -> _T:
    """Await ``body``; once ``deadline`` fired, for at most its ``grace_s`` more.

    Past the grace the body is cancelled (an async body's task; a thread runs on) and the
    call fails ``ABORTED`` — the deadline makes it ``DEADLINE_EXCEEDED`` — without waiting
    for the body any longer.
    """
    job = asyncio.ensure_future(body)
    grace = 0.0
    loop = asyncio.get_running_loop()
    fired: asyncio.Future[None] = loop.create_future()
    remove = deadline.add_listener(lambda: loop.call_soon_threadsafe(_set, fired))
    try:
        first: set[asyncio.Future[Any]] = {job, fired}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if not job.done():
            reason = deadline.reason
            grace = reason.grace_s if isinstance(reason, DeadlineReason) else grace
            waiting = asyncio.ensure_future(clock.sleep(grace))
            last: set[asyncio.Future[Any]] = {job, waiting}
            try:
                await asyncio.wait(last, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiting.cancel()
    except asyncio.CancelledError:
        job.cancel()  # the caller's own cancellation reaches the body, as before
        raise
    finally:
        remove()
        fired.cancel()
    if job.done():
        return job.result()
    job.cancel()
    job.add_done_callback(_retrieve)
    err = AbortError("tool call aborted")
    err.reason = (
        f"the body ignored its batch's deadline for {grace * 1000:g}ms and was abandoned "
        "(in-process a running body cannot be killed: a sync body's thread runs on, its "
        "value discarded)"
    )
    raise err


def _set(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _retrieve(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        fut.exception()
