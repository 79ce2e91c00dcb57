"""Child processes: spawning one, reaping it, and keeping a few of them warm.

Each child is fresh, in its own session (process group) and temporary directory. A child is
used for one run and then discarded: its whole process group is SIGKILLed, the process
reaped and its directory removed. Spawning uses ``subprocess.Popen`` (no event loop
is involved), so warm children outlive the loop that made them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Final, final

__all__ = ("RUNNER", "ChildProcess", "WarmPool", "minimal_env")

RUNNER: Final = Path(__file__).with_name("_child.py")
"""The child's script, passed to the interpreter by path."""

_SAFE_PATH: Final = "/usr/local/bin:/usr/bin:/bin"


def minimal_env(workdir: str) -> dict[str, str]:
    """The child's whole environment: nothing inherited from the host, so no secrets."""
    return {
        "PATH": _SAFE_PATH,
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


@final
class ChildProcess:
    """One spawned child: its process, pipes and working directory."""

    __slots__ = ("_closed", "popen", "workdir")

    def __init__(self, popen: subprocess.Popen[bytes], workdir: str) -> None:
        self.popen = popen
        self.workdir = workdir
        self._closed = False

    @classmethod
    def spawn(cls, python: str, preload: Iterable[str]) -> ChildProcess:
        """Start ``python`` on the runner in a new session and a fresh temporary directory.

        Raises:
            OSError: the interpreter could not be started.
        """
        workdir = tempfile.mkdtemp(prefix="toolray-code-")
        command = [python, "-I", "-S", "-B", "-X", "utf8", str(RUNNER)]
        command.append(json.dumps(sorted(preload)))
        try:
            popen = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=minimal_env(workdir),
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        return cls(popen, workdir)

    @property
    def pid(self) -> int:
        """The child's pid, which is also its process group id."""
        return self.popen.pid

    @property
    def alive(self) -> bool:
        """Whether the process has not exited yet."""
        return self.popen.poll() is None

    def pipes(self) -> tuple[IO[bytes], IO[bytes], IO[bytes]]:
        """The host's ends: (child's stdin, child's stdout, child's stderr)."""
        popen = self.popen
        assert popen.stdin is not None
        assert popen.stdout is not None
        assert popen.stderr is not None
        return popen.stdin, popen.stdout, popen.stderr

    def kill(self) -> None:
        """SIGKILL the child's whole process group (idempotent)."""
        if self.popen.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, signal.SIGKILL)

    async def wait_exit(self) -> int:
        """Wait, without blocking the loop, until the process has exited; reap it."""
        if self.popen.poll() is not None:
            return self.popen.returncode
        loop = asyncio.get_running_loop()
        try:
            pidfd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):  # no pidfd (not Linux): reap in a thread
            return await asyncio.to_thread(self.popen.wait)
        exited = loop.create_future()
        loop.add_reader(pidfd, _resolve, exited)
        try:
            await exited
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
        return self.popen.wait()

    async def discard(self) -> None:
        """Kill, reap and clean up; a second cancellation falls back to a blocking reap."""
        self.kill()
        try:
            await self.wait_exit()
        finally:
            self.discard_now()

    def discard_now(self) -> None:
        """Kill, reap (blocking: the process is SIGKILLed), close the pipes, remove the dir."""
        if self._closed:
            return
        self._closed = True
        self.kill()
        self.popen.wait()
        for pipe in self.pipes():
            with contextlib.suppress(OSError):
                pipe.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


@final
class WarmPool:
    """Up to ``size`` spawned children waiting for a run; each is handed out once."""

    __slots__ = ("_closed", "_idle", "_size", "_spawn", "spawned")

    def __init__(self, spawn: Callable[[], ChildProcess], size: int) -> None:
        self._spawn = spawn
        self._size = size
        self._idle: deque[ChildProcess] = deque()
        self._closed = False
        self.spawned = 0

    @property
    def idle(self) -> int:
        """How many children are waiting."""
        return len(self._idle)

    def idle_children(self) -> list[ChildProcess]:
        """The waiting children (for readiness checks)."""
        return list(self._idle)

    def take(self) -> ChildProcess:
        """A live warm child if there is one, else a freshly spawned one.

        Raises:
            OSError: a child could not be spawned.
        """
        while self._idle:
            child = self._idle.popleft()
            if child.alive:
                return child
            child.discard_now()
        return self._new()

    def refill(self) -> None:
        """Spawn children until ``size`` are waiting (a failure leaves the pool short)."""
        while not self._closed and len(self._idle) < self._size:
            try:
                self._idle.append(self._new())
            except OSError:
                return

    def _new(self) -> ChildProcess:
        child = self._spawn()
        self.spawned += 1
        return child

    def close(self) -> None:
        """Discard every waiting child; the pool spawns no more."""
        self._closed = True
        while self._idle:
            self._idle.popleft().discard_now()
