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
from collections.abc import Callable, Mapping

from toolray import AbortError
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH, OverloadedError
from toolray.isolation import CallOutcome, error_data

from ._call_idle import Waiters
from ._call_orders import Call, settle

__all__ = (
    "Overdue",
    "backstop_s",
    "body_budget",
    "count_body",
    "fail_all",
    "never_started",
    "overloaded",
    "pass_on_overdue",
    "queue_budget",
    "stop_expiry",
    "wait",
)

Overdue = Callable[[], None]
"""Tells the call's executor that its body ran its whole timeout budget."""


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


def never_started(why: str) -> CallOutcome:
    """The outcome of a call aborted before its body started here."""
    err = AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)
    err.reason = why
    return CallOutcome(status="error", error=error_data(err))


def overloaded(budget_s: float) -> CallOutcome:
    """The outcome of a call that found no capacity within its ``max_queue_ms``."""
    err = OverloadedError(
        f"no capacity for the call within the pool's max_queue_ms ({budget_s * 1000:g}ms "
        "left when it reached its worker); it never ran"
    )
    return CallOutcome(status="error", error=error_data(err))


def backstop_s(budget_s: float) -> float:
    """When the worker calls a body overdue itself: its budget plus half (at least 0.25 s)."""
    return budget_s + max(0.25, budget_s / 2)


def count_body(call: Call) -> None:
    """The call leaves for its process: the worker's backstop counts from now."""
    budget = body_budget(call.ident)
    if call.overdue is not None and budget is not None:
        backstop = backstop_s(budget)
        call.expiry = asyncio.get_running_loop().call_later(backstop, _overdue, call)


def pass_on_overdue(call: Call, token: str) -> None:
    """The call's process says its body ran its whole budget: tell the executor (once)."""
    if token == call.token and call.expiry is not None:
        stop_expiry(call)  # the backstop is no longer needed
        _overdue(call)


def _overdue(call: Call) -> None:
    call.expiry = None
    if call.overdue is not None and not call.done.done():
        call.overdue()


def stop_expiry(call: Call) -> None:
    """Stop the call's pending expiry (its queue budget, or its body's)."""
    if call.expiry is not None:
        call.expiry.cancel()
        call.expiry = None


def wait(call: Call, waiters: Waiters[Call]) -> None:
    """``call`` waits for a process; past its ``max_queue_s`` it ends ``OVERLOADED``."""
    call.queued = time.monotonic()
    waiters.add(call)
    budget = queue_budget(call.ident)
    if budget is not None:
        loop = asyncio.get_running_loop()
        call.expiry = loop.call_later(budget, _overloaded, call, waiters, budget)


def _overloaded(call: Call, waiters: Waiters[Call], budget_s: float) -> None:
    call.expiry = None
    if call.proc is None:  # still waiting: it never runs
        waiters.remove(call)
        settle(call, overloaded(budget_s))


def fail_all(waiters: Waiters[Call], outcome: CallOutcome) -> None:
    """Every waiting call ends with ``outcome`` (no process can come)."""
    for call in waiters.drain():
        stop_expiry(call)
        settle(call, outcome)
