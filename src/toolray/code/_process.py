"""Code Mode's children: forked from the runtime's template, kept warm, used once.

Each child gets a fresh scratch directory (made here, the mount point of its sandbox), is
forked by the runtime's :class:`toolray.procs.Template`, builds its sandbox and reports
``ready``. A child serves one run and is then discarded: its process group is SIGKILLed,
the template reaps it and the directory is removed. A warm child that waits longer than
``warm_ttl_s`` exits by itself; the next run or ``wait_warm()`` forks its replacement.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import shutil
import socket
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, final

from toolray.procs import (
    Child,
    ExitStatus,
    FrameDecoder,
    ProtocolError,
    Template,
    TemplateSpec,
)

from ._cgroup import ChildCgroup

__all__ = ("RUNNER", "CodeChild", "WarmPool", "template_spec")

RUNNER: Final = Path(__file__).with_name("_child.py")
"""The child's module, loaded by path into the template."""
_TEMPLATE_ENV: Final = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
_TITLE_ROOM: Final = 512


def template_spec(python: str, config: dict[str, Any]) -> TemplateSpec:
    """The Code Mode template: isolated, a minimal environment, ``_child.py`` preloaded."""
    return TemplateSpec(
        entry=f"{RUNNER}:serve",
        init=f"{RUNNER}:prepare",
        init_args=config,
        python=python,
        isolated=True,
        env=_TEMPLATE_ENV | {"LC_ALL": "C.UTF-8", "HOME": "/", "TMPDIR": "/tmp"},
        cwd="/",
        title_room=_TITLE_ROOM,
    )


@final
class CodeChild:
    """One forked child for one run: its handle, its scratch directory, its ready report."""

    __slots__ = ("_closed", "born", "cgroup", "child", "report", "workdir")

    def __init__(self, child: Child, workdir: str) -> None:
        self.child = child
        self.workdir = workdir
        self.born = time.monotonic()
        """When it was forked (the host's clock): a child older than the time to live is
        not handed out, and it ends by itself a little later."""
        self.report: dict[str, Any] | None = None
        """The ``ready`` frame's confinement report, once read (by a probe or a run)."""
        self.cgroup: ChildCgroup | None = None
        self._closed = False

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group id."""
        return self.child.pid

    @property
    def channel(self) -> socket.socket:
        """The host's end of the child's socket."""
        return self.child.channel

    @property
    def alive(self) -> bool:
        """Whether the template has not reported it ended."""
        return self.child.alive

    def kill(self) -> None:
        """SIGKILL the child's whole process group (idempotent)."""
        self.child.kill()

    async def wait_exit(self) -> ExitStatus:
        """Wait, without blocking the loop, until the template has reaped it."""
        return await self.child.wait_exit()

    def read_ready(self, timeout: float) -> dict[str, Any]:
        """Block until the child's ``ready`` report arrives (a probe; nothing else is sent).

        Raises:
            ProtocolError: the child died or sent something else first.
        """
        if self.report is not None:
            return self.report
        decoder = FrameDecoder()
        sock = self.child.channel
        sock.settimeout(timeout)
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    raise ProtocolError("the child closed its channel before it was ready")
                frames = decoder.feed(data)
                if frames:
                    break
        except TimeoutError:
            raise ProtocolError(f"the child was not ready within {timeout}s") from None
        finally:
            sock.settimeout(None)
        if frames[0].get("op") != "ready" or len(frames) != 1 or decoder.buffered:
            raise ProtocolError("the child's first frame is not its ready report")
        self.report = dict(frames[0].get("confinement") or {})
        return self.report

    async def discard(self) -> None:
        """Kill, wait for the reap, clean up; a second cancellation still cleans up."""
        self.kill()
        try:
            await self.wait_exit()
        finally:
            self.discard_now()

    def discard_now(self) -> None:
        """Kill, close the host's ends, remove the scratch directory (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.kill()
        self.child.close()
        self.child.on_exit(self._cleanup)

    def _cleanup(self, status: ExitStatus) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.workdir, ignore_errors=True)


@final
class WarmPool:
    """Up to ``size`` children forked and booting or ready; each is handed out once."""

    __slots__ = ("_closed", "_fork", "_idle", "_lock", "_size", "_ttl_s", "spawned")

    def __init__(
        self, fork: Callable[[], concurrent.futures.Future[CodeChild]], size: int, ttl_s: float
    ) -> None:
        self._fork = fork
        self._size = size
        self._ttl_s = ttl_s
        self._idle: deque[concurrent.futures.Future[CodeChild]] = deque()
        self._lock = threading.Lock()
        self._closed = False
        self.spawned = 0

    @property
    def idle(self) -> int:
        """How many children are waiting (forked or on their way)."""
        return len(self._idle)

    def pending(self) -> list[concurrent.futures.Future[CodeChild]]:
        """The waiting children's forks (for readiness checks)."""
        with self._lock:
            return list(self._idle)

    async def take(self) -> CodeChild:
        """A live warm child if there is one, else a freshly forked one.

        Raises:
            OSError: the template could not be started.
            toolray.procs.TemplateError: the template died or refused the fork.
        """
        while True:
            with self._lock:
                future = self._idle.popleft() if self._idle else None
            if future is None:
                return await asyncio.wrap_future(self.fork())
            with contextlib.suppress(Exception):  # a failed warm fork: try the next
                child = await asyncio.wrap_future(future)
                if self.usable(child):
                    return child
                child.discard_now()

    def refill(self) -> None:
        """Fork until ``size`` children are waiting (a failure leaves the pool short)."""
        while True:
            with self._lock:
                if self._closed or len(self._idle) >= self._size:
                    return
                try:
                    future = self.fork()
                except OSError:
                    return
                self._idle.append(future)
            future.add_done_callback(self._watch)

    def take_waiting(self, timeout: float) -> CodeChild | None:
        """The first waiting child, once forked (blocking up to ``timeout``), or ``None``."""
        with self._lock:
            future = self._idle.popleft() if self._idle else None
        if future is None:
            return None
        child = future.result(timeout)
        if self.usable(child):
            return child
        child.discard_now()
        return None

    def usable(self, child: CodeChild) -> bool:
        """Alive, as far as the host knows, and younger than the time to live."""
        return child.alive and time.monotonic() - child.born < self._ttl_s

    def drop(self, future: concurrent.futures.Future[CodeChild]) -> None:
        """Take a waiting child out of the pool and discard it (an expired or dead one)."""
        with self._lock:
            if future not in self._idle:
                return  # taken by a run meanwhile: the run discards it
            self._idle.remove(future)
        if future.done() and future.exception() is None:
            future.result().discard_now()

    def put_back(self, child: CodeChild) -> bool:
        """Return an unused child (a probe's) to the front; ``False`` if it is not wanted."""
        with self._lock:
            if self._closed or len(self._idle) >= self._size or not child.alive:
                return False
            done: concurrent.futures.Future[CodeChild] = concurrent.futures.Future()
            done.set_result(child)
            self._idle.appendleft(done)
        return True

    def fork(self) -> concurrent.futures.Future[CodeChild]:
        """A child forked now, outside the waiting ones (counted in :attr:`spawned`)."""
        future = self._fork()
        self.spawned += 1
        return future

    def _watch(self, future: concurrent.futures.Future[CodeChild]) -> None:
        """When a waiting child ends (its time to live, or a death), drop it.

        Its replacement is forked at the next run or ``wait_warm()``, not now: an idle
        runtime keeps no process busy, and one nobody uses forks nothing on its own.
        """
        if future.cancelled() or future.exception() is not None:
            return
        future.result().child.on_exit(lambda status: self.drop(future))

    def close(self) -> list[CodeChild]:
        """Stop refilling; the waiting children (to discard) are returned."""
        with self._lock:
            self._closed = True
            idle, self._idle = list(self._idle), deque()
        children = []
        for future in idle:
            if future.done() and future.exception() is None:
                children.append(future.result())
            else:
                future.add_done_callback(_discard_late)
        return children

    def reopen(self) -> None:
        """Allow refills again (after :meth:`close`)."""
        with self._lock:
            self._closed = False


def _discard_late(future: concurrent.futures.Future[CodeChild]) -> None:
    if not future.cancelled() and future.exception() is None:
        future.result().discard_now()


def fork_child(
    template: Template,
    pid_namespace: bool,
    cgroup: tuple[str | None, int | None],
) -> concurrent.futures.Future[CodeChild]:
    """Make a scratch directory and ask the template for a child that will use it."""
    workdir = tempfile.mkdtemp(prefix="toolray-code-")
    try:
        forked = template.fork_nowait(
            {"workdir": workdir}, pid_namespace=pid_namespace, capture_stderr=True
        )
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    result: concurrent.futures.Future[CodeChild] = concurrent.futures.Future()

    def done(future: concurrent.futures.Future[Child]) -> None:
        failure = future.exception() if not future.cancelled() else None
        if future.cancelled() or failure is not None:
            shutil.rmtree(workdir, ignore_errors=True)
            if result.set_running_or_notify_cancel():
                result.set_exception(failure or concurrent.futures.CancelledError())
            return
        child = CodeChild(future.result(), workdir)
        if not result.set_running_or_notify_cancel():  # nobody waits for it any more
            child.discard_now()
            return
        base, memory = cgroup
        if base is not None:
            with contextlib.suppress(OSError):
                child.cgroup = ChildCgroup(base, child.pid, memory)
        result.set_result(child)

    forked.add_done_callback(done)
    return result
