"""Freed heap given back to the system, now and then, in toolray's long-lived actors.

CPython hands larger blocks (and its own 256 KB arenas) to glibc's ``malloc``; what is freed
stays in glibc's arenas for reuse rather than going back to the system, and a Ray worker runs
a few dozen threads, so glibc keeps several arenas. An actor that lives for days under a load
that comes and goes (bursts of batches, environments opened and closed, scopes created and
disposed) then keeps the resident size of its busiest moment, and a little more after every
burst that left its free blocks scattered. Every :data:`TRIM_EVERY_S` seconds a daemon thread
of each toolray actor asks glibc to return the free pages of every arena
(``malloc_trim(0)``, which releases whole free pages inside the heap too); it takes
milliseconds, holds no lock of ours and releases Python's, so calls run on meanwhile.

Where the C library is not glibc (no ``malloc_trim``) nothing is started.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
import time
from collections.abc import Callable

__all__ = ("TRIM_EVERY_S", "start_trimming", "trim")

TRIM_EVERY_S = 30.0
"""How often a toolray actor gives its free heap pages back."""

_started = False
_lock = threading.Lock()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The C library's ``malloc_trim``, looked up once (``None``: not glibc, none)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def trim() -> bool:
    """Give the free heap pages back now; whether the C library could (glibc: yes)."""
    fn = _malloc_trim()
    if fn is None:
        return False
    fn(0)
    return True


def start_trimming(every_s: float = TRIM_EVERY_S) -> bool:
    """Start this process's trimming thread (once); whether it runs (glibc only)."""
    global _started
    fn = _malloc_trim()
    if fn is None:
        return False
    with _lock:
        if _started:
            return True
        _started = True

    def run() -> None:
        while True:
            time.sleep(every_s)
            fn(0)

    threading.Thread(target=run, name="toolray-heap-trim", daemon=True).start()
    return True
