"""Cooperative cancellation: ``AbortController`` / ``AbortSignal``, thread-safe and awaitable.

A signal fires once, with the reason of whoever aborted it first. Every signal the library
makes records *why* it fired: deadlines carry a :class:`TimeoutReason`, so the timeout policy
can classify TOOL_TIMEOUT by "first reason wins" (P-TIME-8).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, final

from ._clock import Clock, SystemClock
from ._disposer import Disposer
from ._latch import Latch
from .errors import TOOL_TIMEOUT, AbortError

__all__ = (
    "AbortController",
    "AbortSignal",
    "DeadlineReason",
    "TimeoutReason",
    "detach_sources",
    "fire_after",
    "format_ms",
)

DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"


def format_ms(ms: float) -> str:
    """Print milliseconds as JavaScript does (``50``, not ``50.0``; ``0.5`` stays)."""
    return str(int(ms)) if float(ms).is_integer() else repr(float(ms))


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeoutReason:
    """Why a deadline signal fired: ``ms`` of budget ran out (code ``TOOL_TIMEOUT``)."""

    ms: float
    code: str = TOOL_TIMEOUT

    def __str__(self) -> str:
        return f"timed out after {format_ms(self.ms)}ms"


@dataclass(frozen=True, slots=True, kw_only=True)
class DeadlineReason:
    """Why a batch's deadline signal fired: its ``deadline_s`` passed (``DEADLINE_EXCEEDED``).

    ``grace_s`` is how long a body still running may take to stop before the runner stops
    waiting for it (the ``kill_grace_ms`` of whoever set the deadline).
    """

    deadline_s: float
    grace_s: float = 0.0
    code: str = DEADLINE_EXCEEDED

    def __str__(self) -> str:
        return f"the batch's deadline of {self.deadline_s:g}s passed"


@final
class AbortSignal:
    """The read side of cancellation.

    Example:
        >>> ctrl = AbortController()
        >>> ctrl.abort("user")
        >>> ctrl.signal.aborted, ctrl.signal.reason
        (True, 'user')
    """

    __slots__ = ("__weakref__", "_detach", "_is_set", "_latch", "_reason")

    def __init__(self) -> None:
        self._latch = Latch()
        self._is_set = self._latch.is_set_fn
        self._reason: Any = None
        self._detach: list[Callable[[], None]] = []

    @property
    def aborted(self) -> bool:
        """Whether the signal has fired."""
        return self._is_set()

    @property
    def reason(self) -> Any:
        """The first abort reason (``None`` before the signal fires)."""
        return self._reason

    def throw_if_aborted(self) -> None:
        """Raise the reason if it is an exception, else :class:`AbortError`, once aborted."""
        if not self.aborted:
            return
        if isinstance(self._reason, BaseException):
            raise self._reason
        raise AbortError("the operation was aborted")

    def add_listener(self, fn: Callable[[], Any]) -> Disposer:
        """Call ``fn()`` once when the signal fires (at once if it already has)."""
        return Disposer(self._latch.add_listener(fn))

    async def wait(self) -> None:
        """Wait until the signal fires."""
        await self._latch.wait()

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block this thread until the signal fires or ``timeout`` seconds pass."""
        return self._latch.wait_sync(timeout)

    def _fire(self, reason: Any) -> bool:
        # The reason is written before the latch opens, and only by the first abort.
        with _fire_lock:
            if self._latch.is_set:
                return False
            self._reason = reason
        fired = self._latch.set()
        self._release_sources()
        return fired

    def _release_sources(self) -> None:
        detach, self._detach = self._detach, []
        for remove in detach:
            remove()

    @staticmethod
    def any(signals: Iterable[AbortSignal]) -> AbortSignal:
        """A signal that fires with the reason of the first of ``signals`` to fire.

        If several already fired, the first in iteration order gives the reason.
        """
        fused = AbortSignal()
        sources = list(signals)
        for source in sources:
            if source.aborted:
                fused._fire(source.reason)
                return fused
        for source in sources:
            fused._detach.append(source._latch.add_listener(_forward(fused, source)))
        return fused

    @staticmethod
    def timeout(ms: float, *, clock: Clock | None = None) -> AbortSignal:
        """A signal that fires with ``TimeoutReason(ms=ms)`` after ``ms`` milliseconds.

        On a running asyncio loop the timer runs on that loop (through ``clock`` when given);
        elsewhere a daemon thread timer is used.
        """
        return fire_after(ms / 1000.0, TimeoutReason(ms=ms), clock=clock)

    @staticmethod
    def aborted_with(reason: Any = None) -> AbortSignal:
        """An already-fired signal with ``reason``."""
        ctrl = AbortController()
        ctrl.abort(reason)
        return ctrl.signal

    def __repr__(self) -> str:
        state = f"aborted reason={self._reason!r}" if self.aborted else "pending"
        return f"<AbortSignal {state}>"


def fire_after(seconds: float, reason: Any, *, clock: Clock | None = None) -> AbortSignal:
    """A signal that fires with ``reason`` after ``seconds`` (see :meth:`AbortSignal.timeout`).

    Its timer stops when the signal is detached (:func:`detach_sources`) before it fires.
    """
    ctrl = AbortController()
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is None:
        timer = threading.Timer(seconds, ctrl.abort, args=(reason,))
        timer.daemon = True
        timer.start()
        ctrl.signal._detach.append(timer.cancel)
    elif clock is None or isinstance(clock, SystemClock):  # the loop's own timer is it
        handle = loop.call_later(seconds, ctrl.abort, reason)
        ctrl.signal._detach.append(handle.cancel)
    else:
        task = loop.create_task(_abort_after(clock, seconds, ctrl, reason))
        _timer_tasks.add(task)
        task.add_done_callback(_timer_tasks.discard)
        ctrl.signal._detach.append(_canceller(task))
    return ctrl.signal


def detach_sources(signal: AbortSignal) -> None:
    """Detach a derived signal (``any``, ``timeout``) from its sources, once its user is done.

    A fused signal listens to every source; without this, a long-lived caller signal would
    keep every per-call signal derived from it alive.
    """
    signal._release_sources()


def _canceller(task: asyncio.Task[None]) -> Callable[[], None]:
    def cancel() -> None:
        task.cancel()

    return cancel


def _forward(target: AbortSignal, source: AbortSignal) -> Callable[[], None]:
    def fire() -> None:
        target._fire(source.reason)

    return fire


_fire_lock = threading.Lock()
_timer_tasks: set[asyncio.Task[None]] = set()


async def _abort_after(clock: Clock, seconds: float, ctrl: AbortController, reason: Any) -> None:
    await clock.sleep(seconds)
    ctrl.abort(reason)


@final
class AbortController:
    """The write side: ``abort(reason)`` fires ``signal`` once; later calls do nothing."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: Any = None) -> None:
        """Fire the signal; the first reason wins (``None`` becomes an ``AbortError``)."""
        if reason is None:
            reason = AbortError("the operation was aborted")
        self.signal._fire(reason)
