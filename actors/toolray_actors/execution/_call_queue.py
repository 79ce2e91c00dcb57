"""A worker's side of a call's two budgets: its wait for capacity and its body's time.

**Waiting.** A call that cannot start at once (every call process busy) waits here, in
arrival order. Its wait is bounded by the pool's ``max_queue_ms`` (the call's
``max_queue_s`` left when it arrived): past it the call ends ``OVERLOADED`` without
running. A call aborted while it waits never starts (``ABORTED_BEFORE_DISPATCH``; a batch
deadline makes it ``DEADLINE_EXCEEDED``).

**Running.** A call whose tool has a ``timeout_ms`` carries it (its ``timeout_s``), counted
from the moment the body starts — waiting is not running — where the body runs: in the
call's process, which says when it ran out (``CallOverdue``). The worker passes the word on
to the call's executor
(:class:`~toolray_actors._executor_wire.CallOverdue`), which fires the call's deadline
(``TOOL_TIMEOUT``) and runs the cancellation ladder. The worker keeps a backstop of its
own — a body that blocks its process's loop cannot say it — :func:`backstop_s` after it
sent the call.

Plain asyncio, no Ray, all on the worker's loop.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from toolray import AbortError
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH, OverloadedError
from toolray.isolation import CallOutcome, ProcessLink

__all__ = (
    "CallQueue",
    "Overdue",
    "WorkerCall",
    "backstop_s",
    "body_budget",
    "count_body",
    "lost",
    "never_started",
    "overloaded",
    "pass_on_overdue",
    "queue_budget",
    "settle",
    "stop_expiry",
)

Overdue = Callable[[], None]
"""Tells the call's executor that its body ran its whole timeout budget."""


@dataclass(eq=False)
class WorkerCall:
    """One call on its worker (``isolation="call"``), from its arrival to its end."""

    token: str
    key: str
    arguments: object
    ident: Mapping[str, object]
    done: asyncio.Future[CallOutcome]
    aborts: list[object] = field(default_factory=list)
    queued: float = 0.0
    proc: ProcessLink | None = None
    overdue: Overdue | None = None  # tells its executor its body ran its whole budget
    expiry: asyncio.TimerHandle | None = None  # its max_queue_ms, then its body's budget


def _seconds(ident: Mapping[str, object], key: str) -> float | None:
    value = ident.get(key)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0.0, float(value))
    return None


def queue_budget(ident: Mapping[str, object]) -> float | None:
    """How long the call may wait for capacity here (its identity's ``max_queue_s``)."""
    return _seconds(ident, "max_queue_s")


def body_budget(ident: Mapping[str, object]) -> float | None:
    """How long the call's body may run, from its start (its identity's ``timeout_s``)."""
    return _seconds(ident, "timeout_s")


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
        self._calls: deque[WorkerCall] = deque()

    def __len__(self) -> int:
        return len(self._calls)

    def __iter__(self) -> Iterator[WorkerCall]:
        return iter(self._calls)

    def wait(self, call: WorkerCall, budget_s: float | None) -> None:
        """``call`` waits; past ``budget_s`` it ends ``OVERLOADED``."""
        call.queued = time.monotonic()
        self._calls.append(call)
        if budget_s is not None:
            loop = asyncio.get_running_loop()
            call.expiry = loop.call_later(budget_s, self._overdue, call, budget_s)

    def take(self) -> WorkerCall | None:
        """The longest-waiting call still open, out of the queue (``None``: none)."""
        while self._calls:
            call = self._calls.popleft()
            if not call.done.done():
                stop_expiry(call)
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

    def remove(self, call: WorkerCall) -> bool:
        """Take ``call`` out (``False``: it was not waiting)."""
        try:
            self._calls.remove(call)
        except ValueError:
            return False
        stop_expiry(call)
        return True

    def fail_all(self, outcome: CallOutcome) -> None:
        """Every waiting call ends with ``outcome`` (no process can come)."""
        while self._calls:
            call = self._calls.popleft()
            stop_expiry(call)
            settle(call, outcome)

    def _overdue(self, call: WorkerCall, budget_s: float) -> None:
        call.expiry = None
        if self.remove(call):
            settle(call, overloaded(budget_s))


def backstop_s(budget_s: float) -> float:
    """When the worker calls a body overdue itself: its budget plus half (at least 0.25 s)."""
    return budget_s + max(0.25, budget_s / 2)


def count_body(call: WorkerCall) -> None:
    """The call leaves for its process: the worker's backstop counts from now."""
    budget = body_budget(call.ident)
    if call.overdue is not None and budget is not None:
        backstop = backstop_s(budget)
        call.expiry = asyncio.get_running_loop().call_later(backstop, _overdue, call)


def pass_on_overdue(call: WorkerCall, token: str) -> None:
    """The call's process says its body ran its whole budget: tell the executor (once)."""
    if token == call.token and call.expiry is not None:
        stop_expiry(call)  # the backstop is no longer needed
        _overdue(call)


def _overdue(call: WorkerCall) -> None:
    call.expiry = None
    if call.overdue is not None and not call.done.done():
        call.overdue()


def stop_expiry(call: WorkerCall) -> None:
    """Stop the call's pending expiry (its queue budget, or its body's)."""
    if call.expiry is not None:
        call.expiry.cancel()
        call.expiry = None


def settle(call: WorkerCall, outcome: CallOutcome) -> None:
    """``call`` ends with ``outcome`` (unless it ended already)."""
    if not call.done.done():
        call.done.set_result(outcome)
