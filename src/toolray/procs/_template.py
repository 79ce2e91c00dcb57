"""``Template``: the host's side of a template process, its forks and its reports."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import json
import os
import signal as signals
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any, Final, final

from ._child import Child
from ._keeper import keeper_argv, kept_code, kept_pid
from ._values import ExitStatus, TemplateError, TemplateSpec, TemplateStatistics
from ._zygote import MAX_CONTROL_BYTES, ROOM_VARIABLE

__all__ = ("ZYGOTE", "Template")

ZYGOTE: Final = Path(__file__).with_name("_zygote.py")
"""The template's serve loop, run by path."""
_STOP_WAIT_S: Final = 5.0


@final
class _Generation:
    """One template process: its socket, its reader thread, its children and pending forks."""

    def __init__(self, spec: TemplateSpec, counts: dict[str, int]) -> None:
        self.counts = counts
        host, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {"control_fd": theirs.fileno(), "entry": spec.entry}
        config |= {"preload": list(spec.preload), "sys_path": list(spec.sys_path)}
        config |= {"init": spec.init, "init_args": spec.init_args, "loader": spec.loader}
        flags = ["-I", "-S", "-B"] if spec.isolated else ["-P"]
        env = dict(os.environ if spec.env is None else spec.env)
        if spec.title_room:
            env[ROOM_VARIABLE] = "x" * spec.title_room
        config["keeper"] = spec.keeper
        argv = [spec.python, *flags, "-X", "utf8", str(ZYGOTE), json.dumps(config)]
        if spec.keeper:
            argv = keeper_argv(argv)
        self.keeper = spec.keeper
        try:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if spec.keeper else subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
            )
            self.pid = self.popen.pid if not spec.keeper else kept_pid(self.popen)
        except BaseException:
            host.close()
            raise
        finally:
            theirs.close()
        self.control = host
        self.send_lock = threading.Lock()
        self.ready = threading.Event()
        self.dead = threading.Event()
        self.status: ExitStatus | None = None
        self.error: TemplateError | None = None
        """Set once the template is gone: every later fork on it fails with this."""
        self.children: dict[int, Child] = {}
        self.pending: dict[int, tuple[concurrent.futures.Future[Child], Any, int | None]] = {}
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self.read, name="toolray-procs-reader", daemon=True)
        self.reader.start()

    # -- the host's requests -------------------------------------------------------------
    def send(self, message: dict[str, Any], fds: list[int] | None = None) -> None:
        data = json.dumps(message, separators=(",", ":")).encode()
        with self.send_lock:
            if fds:
                socket.send_fds(self.control, [data], fds)
            else:
                self.control.send(data)

    def signal_child(self, pid: int, signum: int) -> None:
        with contextlib.suppress(OSError):
            self.send({"op": "kill", "pid": pid, "signal": int(signum)})

    @property
    def parent_pid(self) -> int | None:
        return None if self.dead.is_set() else self.pid

    # -- the template's reports (the reader thread) --------------------------------------
    def read(self) -> None:
        while True:
            try:
                data = self.control.recv(MAX_CONTROL_BYTES)
            except OSError:
                break
            if not data:
                break
            self.on_message(json.loads(data))
        self.on_death()

    def on_message(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "ready":
            self.ready.set()
        elif op == "forked":
            self.on_forked(message)
        elif op == "fork-failed":
            with self.lock:
                future, sock, stderr = self.pending.pop(message["id"])
            _close(sock, stderr)
            if future.set_running_or_notify_cancel():
                future.set_exception(TemplateError(f"fork failed: {message.get('error')}"))
        elif op == "orphans":
            self.counts["orphans"] += int(message.get("killed") or 0)
        elif op == "exited":
            with self.lock:
                child = self.children.pop(message["pid"], None)
            if child is not None:
                self.counts["exits"] += 1
                child.settle(_status(message))

    def on_forked(self, message: dict[str, Any]) -> None:
        with self.lock:
            future, sock, stderr = self.pending.pop(message["id"])
            pid = message["pid"]
            child = Child(self, pid, sock, stderr, message.get("pid_namespace_error"))
            self.children[pid] = child
        if not future.set_running_or_notify_cancel():  # nobody wants it any more
            child.kill()
            child.close()
            return
        future.set_result(child)

    def on_death(self) -> None:
        code = self.popen.wait()
        self.status = ExitStatus.from_returncode(kept_code(code) if self.keeper else code)
        self.control.close()
        before = "" if self.ready.is_set() else " before it was ready"
        error = TemplateError(
            f"the template exited ({self.status.describe()}){before}", self.status
        )
        with self.lock:
            self.error = error
            pending, self.pending = self.pending, {}
            children, self.children = self.children, {}
        for future, sock, stderr in pending.values():
            _close(sock, stderr)
            if future.set_running_or_notify_cancel():
                future.set_exception(error)
        lost = ExitStatus(signal=signals.SIGKILL, lost=True)
        for child in children.values():
            self.counts["exits"] += 1
            child.settle(lost)
        self.dead.set()


def _status(message: dict[str, Any]) -> ExitStatus:
    return ExitStatus(
        code=message.get("code"),
        signal=message.get("signal"),
        cpu_s=float(message.get("cpu_s") or 0.0),
        max_rss_kb=int(message.get("max_rss_kb") or 0),
    )


def _discard(future: concurrent.futures.Future[Child]) -> None:
    if not future.cancelled() and future.exception() is None:
        child = future.result()
        child.kill()
        child.close()


def _close(sock: socket.socket, stderr: int | None) -> None:
    sock.close()
    if stderr is not None:
        with contextlib.suppress(OSError):
            os.close(stderr)


@final
class Template:
    """A template process that forks children on request (see :mod:`toolray.procs`).

    It starts on first use (or :meth:`start`), restarts when a fork finds it dead, and stops
    with :meth:`stop` (its children are killed and reaped first).

    Example:
        >>> t = Template(TemplateSpec(entry="builtins:print"))  # each child prints its context
        >>> child = t.fork()
        >>> child.wait_exit_blocking(10).describe()
        'code 0'
        >>> child.close()
        >>> t.stop()
    """

    def __init__(self, spec: TemplateSpec) -> None:
        self.spec = spec
        self._lock = threading.Lock()
        self._generation: _Generation | None = None
        self._ids = itertools.count(1)
        self._counts = {"starts": 0, "forks": 0, "exits": 0, "orphans": 0}

    @property
    def pid(self) -> int | None:
        """The running template's pid."""
        generation = self._generation
        return None if generation is None or generation.dead.is_set() else generation.pid

    @property
    def running(self) -> bool:
        """Whether a template process is up (it may still be booting)."""
        return self.pid is not None

    def start(self) -> None:
        """Start the template process unless one is running (it boots in the background).

        Raises:
            OSError: the interpreter could not be started.
        """
        self._current()

    def _current(self) -> _Generation:
        with self._lock:
            generation = self._generation
            if generation is None or generation.dead.is_set():
                generation = self._generation = _Generation(self.spec, self._counts)
                self._counts["starts"] += 1
            return generation

    def wait_ready(self, timeout: float | None = None) -> None:
        """Start if needed and block until the template has booted.

        Raises:
            TemplateError: it died while booting, or did not boot within ``timeout``.
        """
        generation = self._current()
        if not generation.ready.wait(timeout) and not generation.dead.is_set():
            raise TemplateError(f"the template did not boot within {timeout}s")
        if not generation.ready.is_set():
            generation.dead.wait(timeout)
            raise TemplateError("the template exited before it was ready", generation.status)

    def load(self, args: Any = None, data: bytes | None = None) -> int:
        """Run the spec's ``loader(args, data)`` in the template (starting it if needed).

        Children forked after this call inherit what it loads (the template handles its
        requests in order). ``data`` travels in a memory file, so it may be large. Returns
        the pid of the template that got it (a restarted template needs its loads again).

        Raises:
            OSError: the template could not be started or is gone (the next fork restarts it).
        """
        generation = self._current()
        fds: list[int] = []
        if data is not None:
            fd = os.memfd_create("toolray-procs-load", os.MFD_CLOEXEC)
            fds.append(fd)
            os.write(fd, data)  # a memory file takes everything at once
            os.lseek(fd, 0, os.SEEK_SET)
        try:
            generation.send({"op": "load", "args": args, "data": data is not None}, fds)
        finally:
            for fd in fds:
                os.close(fd)
        return generation.pid

    def fork_nowait(
        self, args: Any = None, *, pid_namespace: bool = False, capture_stderr: bool = False
    ) -> concurrent.futures.Future[Child]:
        """Ask for a child; the future resolves once the template has forked it.

        ``args`` (a JSON value) reaches the child as ``ChildContext.args``;
        ``pid_namespace`` makes the child pid 1 of a new pid namespace where the template
        may (``Child.pid_namespace_error`` says why not); ``capture_stderr`` gives the
        host the read end of the child's fd 2. The future fails with
        :class:`TemplateError` when the template dies or refuses.

        Raises:
            OSError: the template could not be started.
        """
        generation = self._current()
        request_id = next(self._ids)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        read_end, write_end = os.pipe2(os.O_CLOEXEC) if capture_stderr else (None, None)
        future: concurrent.futures.Future[Child] = concurrent.futures.Future()
        with generation.lock:
            if generation.error is not None:  # raced with its death: the next fork restarts it
                _close(ours, read_end)
                theirs.close()
                if write_end is not None:
                    os.close(write_end)
                future.set_exception(generation.error)
                return future
            generation.pending[request_id] = (future, ours, read_end)
        message = {"op": "fork", "id": request_id, "args": args}
        message |= {"pid_namespace": pid_namespace, "capture_stderr": capture_stderr}
        fds = [theirs.fileno()] + ([] if write_end is None else [write_end])
        try:
            generation.send(message, fds)
            self._counts["forks"] += 1
        except OSError as err:  # it died: its reader fails the pending forks with its status
            if generation.dead.wait(_STOP_WAIT_S):
                return future
            with generation.lock:
                generation.pending.pop(request_id, None)
            _close(ours, read_end)
            future.set_exception(TemplateError(f"the template is gone: {err}"))
        finally:
            theirs.close()
            if write_end is not None:
                os.close(write_end)
        return future

    def fork(
        self,
        args: Any = None,
        *,
        pid_namespace: bool = False,
        capture_stderr: bool = False,
        timeout: float | None = None,
    ) -> Child:
        """:meth:`fork_nowait`, blocking until the child exists (``TimeoutError`` past it)."""
        future = self.fork_nowait(args, pid_namespace=pid_namespace, capture_stderr=capture_stderr)
        return future.result(timeout)

    async def fork_async(
        self, args: Any = None, *, pid_namespace: bool = False, capture_stderr: bool = False
    ) -> Child:
        """:meth:`fork_nowait`, awaited (cancelling it kills the child once it exists)."""
        future = self.fork_nowait(args, pid_namespace=pid_namespace, capture_stderr=capture_stderr)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:  # a child forked meanwhile has nobody: it goes
            future.add_done_callback(_discard)
            raise

    async def adopt_async(self, pid: int, channel: socket.socket) -> Child:
        """Make ``pid`` a child: a copy a child forked of itself, about to be re-parented here.

        The caller verified who ``pid`` is (``channel`` is its connection, which the child
        then owns) and lets it leave its parent once this returns: the template reaps,
        reports and kills it like a forked child, never as an orphan.

        Raises:
            TemplateError: the template is gone, or refused the pid.
        """
        generation = self._current()
        request_id = next(self._ids)
        future: concurrent.futures.Future[Child] = concurrent.futures.Future()
        with generation.lock:
            if generation.error is not None:
                raise generation.error
            generation.pending[request_id] = (future, channel, None)
        try:
            generation.send({"op": "adopt", "id": request_id, "pid": pid})
        except OSError as err:
            with generation.lock:
                generation.pending.pop(request_id, None)
            raise TemplateError(f"the template is gone: {err}") from None
        return await asyncio.wrap_future(future)

    def stop(self, timeout: float = _STOP_WAIT_S) -> None:
        """Kill and reap every child, then end the template (idempotent; blocks briefly)."""
        with self._lock:
            generation, self._generation = self._generation, None
        if generation is None:
            return
        with contextlib.suppress(OSError):
            generation.send({"op": "stop"})
        if not generation.dead.wait(timeout):
            with contextlib.suppress(OSError):
                os.killpg(generation.popen.pid, signals.SIGKILL)
            generation.dead.wait()
        generation.reader.join()

    def statistics(self) -> TemplateStatistics:
        """A frozen snapshot of the counters."""
        generation = self._generation
        alive = 0 if generation is None else len(generation.children)
        return TemplateStatistics(
            running=self.running,
            starts=self._counts["starts"],
            forks=self._counts["forks"],
            exits=self._counts["exits"],
            alive=alive,
            orphans=self._counts["orphans"],
        )
