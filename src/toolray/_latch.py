"""A one-shot, thread-safe latch: the primitive under signals and test gates.

Once set it stays set. Listeners run once (at once if already set); waiters can block a
thread (``wait_sync``) or await from any asyncio loop (``wait``), and setting it from any
thread wakes both.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ("Latch",)

_log = logging.getLogger("toolray")


class Latch:
    """A thread-safe one-shot event with listeners.

    The ``threading.Event`` a blocked thread waits on is made only when one waits
    (``wait_sync``): most latches — one per signal, several per call — never block a thread.
    """

    __slots__ = ("_event", "_listeners", "_lock", "_set")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._event: threading.Event | None = None
        self._listeners: list[Callable[[], Any]] | None = []

    @property
    def is_set_fn(self) -> Callable[[], bool]:
        """A bound check of the latch (a fast check for hot paths)."""
        return self._is_set

    def _is_set(self) -> bool:
        return self._set

    @property
    def is_set(self) -> bool:
        """Whether the latch has been set."""
        return self._set

    def set(self) -> bool:
        """Set the latch and run the listeners; ``False`` if it was already set."""
        with self._lock:
            listeners = self._listeners
            if listeners is None:
                return False
            self._listeners = None
            self._set = True
            event = self._event
        if event is not None:
            event.set()
        for listener in listeners:
            _call_contained(listener)
        return True

    def add_listener(self, fn: Callable[[], Any]) -> Callable[[], None]:
        """Call ``fn`` once when set (now, if already set); return a remover."""
        with self._lock:
            listeners = self._listeners
            if listeners is not None:
                listeners.append(fn)
        if listeners is None:
            _call_contained(fn)
            return _noop

        def remove() -> None:
            with self._lock:
                current = self._listeners
                if current is not None and fn in current:
                    current.remove(fn)

        return remove

    def wait_sync(self, timeout: float | None = None) -> bool:
        """Block the calling thread until set (or ``timeout`` seconds); return whether set."""
        with self._lock:
            if self._set:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    async def wait(self) -> None:
        """Wait, from any asyncio loop, until the latch is set."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if threading.get_ident() == _loop_thread(loop):
                _resolve(fut)
            else:
                loop.call_soon_threadsafe(_resolve, fut)

        remove = self.add_listener(wake)
        try:
            await fut
        finally:
            remove()


def _loop_thread(loop: asyncio.AbstractEventLoop) -> int | None:
    return getattr(loop, "_thread_id", None)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _noop() -> None:
    return None


def _call_contained(fn: Callable[[], Any]) -> None:
    try:
        fn()
    except Exception:
        _log.exception("toolray: a signal listener raised")
