"""Body timers: waiting for capacity does not count against a tool's ``timeout_ms``.

``TimeoutPolicy``'s deadline window opens when its wrapper runs and covers the wrappers
inside it and the body (P-TIME-12). A runtime that queues calls for capacity — a worker
slot, a call process — would count that wait too, and a call that only waited would end
``TOOL_TIMEOUT`` although its body never ran late. So the policy's deadline is a
:class:`BodyTimer`, registered under the call's execution token (:func:`body_timers`),
which a runner may pause while the call waits for capacity and start again, with the
whole budget, when the body starts — or hand over: pause it and have the budget counted
where the body runs, from its start, then :meth:`~BodyTimer.fire` it if the body overran
(a Ray executor does that: its worker counts). In-process nothing waits for capacity, and
nothing pauses.

A running timer fires with its reason ``seconds`` after its latest start; a paused one
does not fire until started again.
"""

from __future__ import annotations

import asyncio
from typing import Any, final

from ._clock import Clock, SystemClock
from ._signals import AbortController, AbortSignal

__all__ = ("BodyTimer", "body_timers", "register_body_timer", "unregister_body_timer")

_timers: dict[object, list[BodyTimer]] = {}
"""The timers of each execution whose dispatch stage is running, by its token."""


@final
class BodyTimer:
    """A deadline signal whose clock runs only once started (see the module docstring)."""

    __slots__ = ("_clock", "_ctrl", "_reason", "_seconds", "_stop")

    def __init__(self, seconds: float, reason: Any, *, clock: Clock | None = None) -> None:
        self._seconds = seconds
        self._reason = reason
        self._clock = clock
        self._ctrl = AbortController()
        self._stop: asyncio.TimerHandle | asyncio.Task[None] | None = None

    @property
    def signal(self) -> AbortSignal:
        """Fires with the reason once the budget ran out after a start."""
        return self._ctrl.signal

    @property
    def running(self) -> bool:
        """Whether the timer is counting now."""
        return self._stop is not None

    @property
    def seconds(self) -> float:
        """The whole budget."""
        return self._seconds

    def fire(self) -> None:
        """Fire now: the budget ran out where the body runs (a runner measured it there)."""
        self.pause()
        self._ctrl.abort(self._reason)

    def start(self) -> None:
        """Count the whole budget from now (a no-op while counting, or once fired)."""
        if self._stop is not None or self._ctrl.signal.aborted:
            return
        loop = asyncio.get_running_loop()
        if self._clock is None or isinstance(self._clock, SystemClock):  # the loop's timer
            self._stop = loop.call_later(self._seconds, self._fire)
        else:
            self._stop = loop.create_task(self._after(self._clock))

    def pause(self) -> None:
        """Stop counting: the call waits for capacity (``start`` gives it its whole budget)."""
        stop, self._stop = self._stop, None
        if stop is not None:
            stop.cancel()

    close = pause

    def _fire(self) -> None:
        self._stop = None
        self._ctrl.abort(self._reason)

    async def _after(self, clock: Clock) -> None:
        await clock.sleep(self._seconds)
        self._fire()


def register_body_timer(token: object, timer: BodyTimer) -> None:
    """``timer`` runs with the body of the execution ``token`` (until unregistered)."""
    _timers.setdefault(token, []).append(timer)


def unregister_body_timer(token: object, timer: BodyTimer) -> None:
    """``timer`` is done (its wrapper returned): stop it and forget it."""
    timer.close()
    timers = _timers.get(token)
    if timers is not None:
        if timer in timers:
            timers.remove(timer)
        if not timers:
            del _timers[token]


def body_timers(token: object) -> tuple[BodyTimer, ...]:
    """The timers registered for the execution ``token`` (innermost last)."""
    return tuple(_timers.get(token, ()))
