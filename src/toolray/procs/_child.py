"""The host's handle on one forked child: its socket, its stderr, its end."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal as signals
import socket
import threading
from collections.abc import Callable
from typing import Protocol, final

from ._values import ExitStatus

__all__ = ("Child", "ChildOwner")

_log = logging.getLogger("toolray.procs")

_EXIT_CODE_FIELD = 49
"""``exit_code`` in ``/proc/<pid>/stat`` (field 52), counted from the state (field 3)."""


class ChildOwner(Protocol):
    """What a child needs of its template: a way to ask for a signal."""

    def signal_child(self, pid: int, signum: int) -> None:
        """Send ``signum`` to the child's process group (ignored once it was reaped)."""
        ...

    @property
    def parent_pid(self) -> int | None:
        """The pid of the children's parent (the template), while it runs."""
        ...


@final
class Child:
    """One child of a template.

    ``channel`` is the host's end of a connected ``AF_UNIX`` stream socket whose other end
    is the child's fd 3; ``stderr`` (when captured) the read end of a pipe on the child's
    fd 2. The template is the child's parent: it reaps it and reports how it ended, which
    :meth:`wait_exit` returns. Close the host's descriptors with :meth:`close`.
    """

    __slots__ = (
        "_callbacks",
        "_exited",
        "_lock",
        "_owner",
        "_status",
        "_waiters",
        "channel",
        "pid",
        "pid_namespace_error",
        "stderr",
    )

    def __init__(
        self,
        owner: ChildOwner,
        pid: int,
        channel: socket.socket,
        stderr: int | None,
        pid_namespace_error: str | None,
    ) -> None:
        self._owner = owner
        self.pid = pid
        """The child's pid (in the host's pid namespace); also its process group id."""
        self.channel = channel
        self.stderr = stderr
        self.pid_namespace_error = pid_namespace_error
        """Why a requested pid namespace was not made (``None``: made, or not asked for)."""
        self._status: ExitStatus | None = None
        self._exited = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[ExitStatus], None]] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[ExitStatus]]] = []

    @property
    def status(self) -> ExitStatus | None:
        """How it ended, once the template reported it."""
        return self._status

    @property
    def alive(self) -> bool:
        """Whether no end has been reported yet."""
        return self._status is None

    def kill(self, signum: int = signals.SIGKILL) -> None:
        """Signal the child's whole process group (a no-op once it has ended)."""
        if self._status is None:
            self._owner.signal_child(self.pid, signum)

    def zombie_status(self) -> ExitStatus | None:
        """How it ended, read from the kernel while it is a zombie its template has not reaped.

        The template's report (:meth:`wait_exit`) comes after a reap and a message; this
        is at hand the moment the child has died. ``None`` while it runs, once it was
        reaped, or where ``/proc`` does not tell (its CPU and memory are not reported).
        """
        if self._status is not None:
            return self._status
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as stat:
                text = stat.read()
        except OSError:
            return None
        fields = text[text.rfind(b")") + 2 :].split()
        # a zombie whose parent is our template is still this child (its pid is not free)
        parent = self._owner.parent_pid
        if len(fields) < _EXIT_CODE_FIELD + 1 or fields[0] != b"Z" or parent is None:
            return None
        if int(fields[1]) != parent:
            return None
        status = int(fields[_EXIT_CODE_FIELD])
        if os.WIFSIGNALED(status):
            return ExitStatus(signal=os.WTERMSIG(status))
        return ExitStatus(code=os.WEXITSTATUS(status))

    def wait_exit_blocking(self, timeout: float | None = None) -> ExitStatus | None:
        """Block until the child has ended (``None`` past ``timeout``)."""
        self._exited.wait(timeout)
        return self._status

    async def wait_exit(self) -> ExitStatus:
        """Wait, without blocking the loop, until the template reports the child's end."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[ExitStatus] = loop.create_future()
        with self._lock:
            if self._status is None:
                self._waiters.append((loop, future))
        if self._status is not None:
            return self._status
        return await future

    def on_exit(self, callback: Callable[[ExitStatus], None]) -> None:
        """Call ``callback(status)`` when the child ends (at once if it has).

        It runs on the template's reader thread: keep it short and non-blocking.
        """
        with self._lock:
            if self._status is None:
                self._callbacks.append(callback)
                return
        callback(self._status)

    def close(self) -> None:
        """Close the host's descriptors (idempotent; the child is not signalled)."""
        self.channel.close()
        if self.stderr is not None:
            with contextlib.suppress(OSError):
                os.close(self.stderr)
            self.stderr = None

    def settle(self, status: ExitStatus) -> None:
        """Record the child's end and wake its waiters (the template's reader calls this)."""
        with self._lock:
            if self._status is not None:
                return
            self._status = status
            callbacks, self._callbacks = self._callbacks, []
            waiters, self._waiters = self._waiters, []
        self._exited.set()
        for callback in callbacks:
            try:
                callback(status)
            except Exception:  # a listener's fault stays with the listener
                _log.exception("an exit callback of child %d raised", self.pid)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits
                loop.call_soon_threadsafe(_resolve, future, status)

    def __repr__(self) -> str:
        state = "alive" if self._status is None else self._status.describe()
        return f"<Child pid={self.pid} {state}>"


def _resolve(future: asyncio.Future[ExitStatus], status: ExitStatus) -> None:
    if not future.done():
        future.set_result(status)
