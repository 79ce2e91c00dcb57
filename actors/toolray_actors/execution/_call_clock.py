"""One call's budgets as its executor sees them: waiting is not running.

A call may wait for capacity in its executor (for a pool member with room, in an elastic
pool) and then on its worker (for a call process). Neither wait counts against its
``timeout_ms``: the ``TimeoutPolicy`` deadlines of its execution
(``toolray.policies.body_timers``) pause while it waits here, and when it leaves for a
``"call"`` worker they are *handed over* — paused, their budget sent with the call
(``timeout_s``) — so its process counts the body's time from the moment the body starts,
free of any queue or loop delay on the way. A body that runs past it is reported
(``CallOverdue``) and its deadline fires here (:meth:`CallClock.overdue`): ``TOOL_TIMEOUT``,
then the ladder. With ``"shared"`` isolation the deadlines run on here once the call
leaves (:meth:`CallClock.leaves` says why).

The waits together are bounded by the pool's ``max_queue_ms``: the executor gives up at
it (``OVERLOADED``) and the worker gets what is left of it (``max_queue_s``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from toolray.policies import BodyTimer
from toolray_actors._placement import PROCESS_ISOLATION

__all__ = ("CallClock",)


class CallClock:
    """The body timers of one call and its queue budget (``None``: unbounded)."""

    __slots__ = ("_budget", "_since", "_timers")

    def __init__(self, timers: Sequence[BodyTimer], max_queue_s: float | None) -> None:
        self._timers = tuple(timers)
        self._budget = max_queue_s
        self._since: float | None = None  # when the call first waited

    def waits(self) -> None:
        """The call waits for capacity here: its deadlines pause (its queue budget runs)."""
        if self._since is None:
            self._since = time.monotonic()
        for timer in self._timers:
            timer.pause()

    def leaves(self, isolation: str) -> float | None:
        """The call leaves for its worker: the budget the worker counts (``None``: none).

        With ``"call"`` (or ``"sandbox"``) isolation its deadlines are handed over —
        paused here, counted by its process from the body's start (the worker keeps a
        backstop, its own loop never runs a body). With ``"shared"`` they run on here
        (started again if it waited here): a body that blocked its worker's loop could not
        say it overran, and only this executor's ladder can stop it then.
        """
        if isolation not in PROCESS_ISOLATION or not self._timers:
            for timer in self._timers:
                timer.start()
            return None
        for timer in self._timers:
            timer.pause()
        return min(t.seconds for t in self._timers)

    def overdue(self) -> None:
        """The worker says the body ran its whole budget: the tightest deadline fires."""
        if self._timers:
            min(self._timers, key=lambda t: t.seconds).fire()

    def left(self) -> float | None:
        """What is left of the queue budget (``None``: unbounded)."""
        if self._budget is None:
            return None
        spent = 0.0 if self._since is None else time.monotonic() - self._since
        return max(0.0, self._budget - spent)
