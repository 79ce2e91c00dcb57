"""Threads a process keeps for its whole life, which no call left behind.

A call process is reused only while it is clean: no thread, task or process that a body
started is still running (``toolray.isolation``). A thread that serves every later call of
its process — the event loop of the MCP HTTP connector, which holds the process's pooled
sessions — is declared with :func:`hold_thread`, and that check counts it as the process's
own, so the process (and its sessions) is reused rather than retired after each call.
"""

from __future__ import annotations

import threading
import weakref

__all__ = ("held_threads", "hold_thread")

_held: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_lock = threading.Lock()


def hold_thread(thread: threading.Thread) -> None:
    """Declare ``thread`` one the process keeps for its whole life (not a body's leftover)."""
    with _lock:
        _held.add(thread)


def held_threads() -> int:
    """How many declared threads are alive."""
    with _lock:
        return sum(1 for thread in _held if thread.is_alive())
