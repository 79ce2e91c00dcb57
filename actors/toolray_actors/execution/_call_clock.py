"""One call's waits for capacity, as its executor sees them: waiting is not running.

A call may wait for capacity twice: in its executor, for a pool member with room (an
elastic pool), then on its worker, for a call process or a body slot (the worker says so:
``CallWait``). While it waits, its ``timeout_ms`` clock — the ``TimeoutPolicy`` deadlines
of its execution (``toolray.policies.body_timers``) — is paused; when its body starts,
the clock starts again with the whole budget. The waits together are bounded by the
pool's ``max_queue_ms``: the executor gives up at it (``OVERLOADED``), and the worker gets
what is left of it (the call's ``max_queue_s``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from toolray.policies import BodyTimer

__all__ = ("CallClock",)


class CallClock:
    """The body timers of one call and its queue budget (``None``: unbounded)."""

    __slots__ = ("_budget", "_since", "_timers")

    def __init__(self, timers: Sequence[BodyTimer], max_queue_s: float | None) -> None:
        self._timers = tuple(timers)
        self._budget = max_queue_s
        self._since: float | None = None  # when the call first waited

    def waits(self) -> None:
        """The call waits for capacity: its clock stops (its queue budget runs)."""
        if self._since is None:
            self._since = time.monotonic()
        for timer in self._timers:
            timer.pause()

    def starts(self) -> None:
        """Its body starts (or may start at once): its clock runs again, whole."""
        for timer in self._timers:
            timer.start()

    def on_worker(self, waiting: bool) -> None:
        """The worker's word: the call waits there (``True``) or its body starts."""
        if waiting:
            self.waits()
        else:
            self.starts()

    def left(self) -> float | None:
        """What is left of the queue budget (``None``: unbounded)."""
        if self._budget is None:
            return None
        spent = 0.0 if self._since is None else time.monotonic() - self._since
        return max(0.0, self._budget - spent)
