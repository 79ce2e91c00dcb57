"""The calls of one worker that wait for capacity — and why waiting is not running.

A call that cannot start at once (every call process busy, or every body slot taken)
waits here, in arrival order. Such a call is not running, so the worker says so in its
outcome stream (:class:`~toolray_actors._executor_wire.CallWait`): its executor pauses the
call's ``timeout_ms`` clock while it waits, and starts it again when the body starts. The
wait itself is bounded by the pool's ``max_queue_ms`` (the call's ``max_queue_s`` left when
it arrived): past it the call ends ``OVERLOADED`` without running. A call aborted while it
waits never starts either (``ABORTED_BEFORE_DISPATCH``; a batch deadline makes it
``DEADLINE_EXCEEDED``).

Plain asyncio, no Ray, all on the worker's loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol

from toolray import AbortError
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH, OverloadedError
from toolray.isolation import CallOutcome

__all__ = (
    "CallQueue",
    "Notify",
    "Waiter",
    "lost",
    "never_started",
    "overloaded",
    "queue_budget",
    "settle",
)

Notify = Callable[[bool], None]
"""Tells the call's executor: ``True`` — it waits; ``False`` — its body starts now."""


class Waiter(Protocol):
    """A call as the queue sees it."""

    token: str
    done: asyncio.Future[CallOutcome]
    notify: Notify | None
    queued: float
    expiry: asyncio.TimerHandle | None


def queue_budget(ident: Mapping[str, object]) -> float | None:
    """How long the call may wait for capacity here (its identity's ``max_queue_s``)."""
    value = ident.get("max_queue_s")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0.0, float(value))
    return None


def lost(how: str) -> CallOutcome:
    """The outcome of a call whose process died under it (or could not be started)."""
    return CallOutcome(status="lost", detail=f"the call's process {how}")


def never_started(why: str) -> CallOutcome:
    """The outcome of a call aborted before its body started here."""
    err = AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)
    err.reason = why
    return CallOutcome(status="error", error=err)


def overloaded(budget_s: float) -> CallOutcome:
    """The outcome of a call that found no capacity within its ``max_queue_ms``."""
    err = OverloadedError(
        f"no capacity for the call within the pool's max_queue_ms ({budget_s * 1000:g}ms "
        "left when it reached its worker); it never ran"
    )
    return CallOutcome(status="error", error=err)


class CallQueue:
    """The waiting calls of one worker, oldest first."""

    def __init__(self) -> None:
        self._calls: deque[Waiter] = deque()

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[Waiter]:
        return iter(self._calls)

    def wait(self, call: Waiter, budget_s: float | None) -> None:
        """``call`` waits (its executor is told); past ``budget_s`` it ends ``OVERLOADED``."""
        call.queued = time.monotonic()
        self._calls.append(call)
        if call.notify is not None:
            call.notify(True)
        if budget_s is not None:
            loop = asyncio.get_running_loop()
            call.expiry = loop.call_later(budget_s, self._overdue, call, budget_s)

    def take(self) -> Waiter | None:
        """The longest-waiting call still open, out of the queue (``None``: none)."""
        while self._calls:
            call = self._calls.popleft()
            if not call.done.done():
                _stop_expiry(call)
                return call
        return None

    def prune(self) -> None:
        """Drop the settled calls at the head."""
        while self._calls:
            head = self._calls.popleft()
            if not head.done.done():
                self._calls.appendleft(head)
                return

    def oldest(self) -> float:
        """When the oldest waiting call began to wait (0 when none waits)."""
        return next((call.queued for call in self._calls), 0.0)

    def remove(self, call: Waiter) -> bool:
        """Take ``call`` out (``False``: it was not waiting)."""
        try:
            self._calls.remove(call)
        except ValueError:
            return False
        _stop_expiry(call)
        return True

    def fail_all(self, outcome: CallOutcome) -> None:
        """Every waiting call ends with ``outcome`` (no process can come)."""
        while self._calls:
            call = self._calls.popleft()
            _stop_expiry(call)
            settle(call, outcome)

    def _overdue(self, call: Waiter, budget_s: float) -> None:
        call.expiry = None
        if self.remove(call):
            settle(call, overloaded(budget_s))


def _stop_expiry(call: Waiter) -> None:
    if call.expiry is not None:
        call.expiry.cancel()
        call.expiry = None


def settle(call: Waiter, outcome: CallOutcome) -> None:
    """``call`` ends with ``outcome`` (unless it ended already)."""
    if not call.done.done():
        call.done.set_result(outcome)
