"""In-process upkeep of a registry's instances: parking idle ones, closing a disposed scope's.

A Ray executor runs the same upkeep on its own loop; an in-process registry has no loop of
its own (each ``execute_batch_sync`` may run on a fresh one), so its parker is a daemon
thread that sleeps until the next instance is due and parks it on a loop of its own (turns
are safe across loops). It starts with the first instance that may park, holds the
registry's instances only weakly, and ends with them.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

from ._instances import Instances

__all__ = ("Parker", "dispose_scope")

_IDLE_WAIT_S = 60.0


class Parker:
    """Parks the idle instances of one :class:`Instances` (system clock only)."""

    def __init__(self, instances: Instances) -> None:
        self._instances = weakref.ref(instances)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poke(self) -> None:
        """An instance opened or came back: look again at when the next one is due."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=_serve,
                    args=(self._instances, self._wake),
                    daemon=True,
                    name="toolray-parker",
                )
                self._thread.start()
        self._wake.set()


def _serve(ref: weakref.ref[Instances], wake: threading.Event) -> None:
    while True:
        instances = ref()
        if instances is None:
            return
        due = instances.next_park_at()
        delay = _IDLE_WAIT_S if due is None else due - instances.clock.now()
        if delay <= 0:
            asyncio.run(instances.park_idle())
            continue
        del instances  # sleep without keeping the registry alive
        wake.wait(min(delay, _IDLE_WAIT_S))
        wake.clear()


def dispose_scope(
    instances: Instances,
    scope: str,
    blocking: Callable[[Coroutine[Any, Any, Any]], Any],
) -> None:
    """Close ``scope``'s instances: the idle ones now, the busy ones when their turn ends.

    Called from a scope's (synchronous) dispose: waiting here for a busy instance could
    wait for a body running on this very thread's loop, so those close on a thread.
    """
    if scope not in instances.scopes():
        return
    busy = blocking(instances.close_idle(scope))
    if busy:
        threading.Thread(
            target=asyncio.run,
            args=(instances.close_scope(scope),),
            daemon=True,
            name="toolray-dispose",
        ).start()
