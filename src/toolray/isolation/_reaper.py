"""What a body leaves behind: the processes it started, killed when its call ends.

A call process is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): whatever its body starts
stays below it, even a daemon that double-forks and calls ``setsid`` to leave its group —
when the daemon's parent exits, the daemon is re-parented to the call process, not to the
machine's init. At the end of each call :func:`kill_descendants` kills every process below
it and reaps them, and says how many there were. (Should the call process itself be killed
first — the ladder's last step — what is below it is re-parented to its template, itself a
subreaper, which kills it: ``toolray.procs``.) Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from typing import Final

__all__ = ("become_subreaper", "children", "kill_descendants", "stop_subreaping")

_PR_SET_CHILD_SUBREAPER: Final = 36
_ROUNDS: Final = 1024
"""Kill rounds before giving up on a tree that keeps forking (its process is then retired)."""


def become_subreaper() -> bool:
    """Make this process the reaper of every orphan below it; ``False`` where it cannot."""
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def stop_subreaping() -> None:
    """Let orphans below this process go to the next subreaper up again (a copy's way out)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def children(pid: int | str = "self") -> list[int]:
    """The children of ``pid`` (every thread's), from ``/proc``."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as kids:
                found += [int(kid) for kid in kids.read().split()]
    return found


def _tree() -> list[int]:
    found, todo = [], children()
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children(pid)
    return found


def _has_children() -> bool:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        return False
    return True  # one runs (pid 0), or one ended and was just reaped: look at them all


def kill_descendants() -> int:
    """SIGKILL every process below this one and reap them; how many were killed.

    Cheap when there is none (one ``waitpid``). Each round kills what is alive below and
    waits for one of them to end; a tree that forks faster than it is killed is left after
    :data:`_ROUNDS` rounds (the caller retires its process then).
    """
    if not _has_children():
        return 0
    killed: set[int] = set()
    for _ in range(_ROUNDS):
        for pid in _tree():
            if pid not in killed:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        try:
            os.waitpid(-1, 0)  # every child is dying: one ends in a moment
        except ChildProcessError:
            break
        _reap()
    return len(killed)


def _reap() -> None:
    """Reap every child that has ended (the killed ones, and what they leave to us)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
