"""The template: a small warm process that forks call processes on request.

A worker never forks itself (a Ray worker has dozens of threads and hundreds of MB). It
starts one template with ``subprocess`` — a plain Python holding toolray's core, cloudpickle
and the tools' definitions (shipped to it as cloudpickle blobs, unpickled once) — and asks
it for call processes. Each fork inherits the loaded definitions, so a new call process is
ready in about a millisecond.

The host side is :class:`Template`. The control socket carries JSON frames both ways:
``preload`` (a definition's key and blob) and ``fork`` (with the call process's socket end
passed as ``SCM_RIGHTS``) from the worker; ``forked`` (the pid) and ``exited`` (the pid and
its raw wait status: the template is the parent and reaps) from the template. A call
process gets its own process group (a kill takes whatever the body started with it), a
parent-death signal, no core dumps and a data-segment limit (``RLIMIT_DATA``; cgroups are
not assumed). The template ends when the worker hangs up, killing what it forked.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import itertools
import json
import os
import resource
import selectors
import signal
import socket
import struct
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, NoReturn

import cloudpickle

__all__ = ("ChildExit", "Forked", "Template", "describe_exit")

_HEADER: Final = struct.Struct(">I")
_MAX_DEFS = 256
_MAX_EXITS = 4096
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Forked:
    """A call process the template forked: its pid and the worker's end of its socket."""

    pid: int
    sock: socket.socket


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildExit:
    """How a call process ended (from the template, its parent)."""

    pid: int
    exit_code: int | None
    signal: int | None


def describe_exit(ended: ChildExit, memory_exit: int, memory_mb: int) -> str:
    """How the process ended, in words (for ``WORKER_LOST``'s message)."""
    if ended.signal is not None:
        try:
            name = signal.Signals(ended.signal).name
        except ValueError:
            name = f"signal {ended.signal}"
        extra = " (out of memory?)" if ended.signal == signal.SIGKILL else ""
        return f"was killed by {name}{extra}"
    if ended.exit_code == memory_exit:
        return f"ran out of memory (its limit is {memory_mb} MB)"
    return f"exited with status {ended.exit_code}"


def _frame(message: dict[str, Any]) -> bytes:
    payload = json.dumps(message, separators=(",", ":")).encode()
    return _HEADER.pack(len(payload)) + payload


def _frames(buffer: bytearray) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(buffer) >= _HEADER.size:
        (size,) = _HEADER.unpack_from(buffer)
        if len(buffer) < _HEADER.size + size:
            break
        out.append(json.loads(buffer[_HEADER.size : _HEADER.size + size]))
        del buffer[: _HEADER.size + size]
    return out


# ---------------------------------------------------------------------- host side
class Template:
    """The worker's handle on its template process (one event loop uses it).

    The template runs this interpreter with this process's environment (plus ``env``) and
    import path. How each call process ended is kept a while (:meth:`exit_of`).
    """

    def __init__(
        self,
        *,
        memory_mb: int,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.memory_mb = memory_mb
        self._exits: OrderedDict[int, ChildExit] = OrderedDict()
        self._exit_waiters: dict[int, asyncio.Future[None]] = {}
        self._sock, theirs = socket.socketpair()
        path = os.pathsep.join(p for p in sys.path if p)
        env = {**os.environ, **(env or {}), "PYTHONPATH": path}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _BOOT, str(theirs.fileno()), str(memory_mb)],
            pass_fds=(theirs.fileno(),),
            env=env,
            start_new_session=True,
        )
        theirs.close()
        self._sock.setblocking(False)
        self._buffer = bytearray()
        self._ids = itertools.count(1)
        self._forks: dict[int, tuple[asyncio.Future[Forked], socket.socket]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.alive = True

    def _attach(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(self._sock.fileno(), self._readable)

    def preload(self, key: str, blob: bytes) -> None:
        """Ship a definition: call processes forked after this hold it already."""
        self._attach()
        blob_text = base64.b64encode(blob).decode("ascii")
        self._send(_frame({"op": "preload", "key": key, "blob": blob_text}))

    async def fork(self) -> Forked:
        """A new call process, connected to this worker by its own socket."""
        self._attach()
        if not self.alive:
            raise OSError("the template process is gone")
        mine, theirs = socket.socketpair()
        ident = next(self._ids)
        fut: asyncio.Future[Forked] = asyncio.get_running_loop().create_future()
        self._forks[ident] = (fut, mine)
        try:
            socket.send_fds(self._sock, [_frame({"op": "fork", "id": ident})], [theirs.fileno()])
        except OSError:
            self._forks.pop(ident, None)
            mine.close()
            raise
        finally:
            theirs.close()
        return await fut

    def _send(self, data: bytes) -> None:
        try:
            self._sock.setblocking(True)
            self._sock.sendall(data)
        except OSError:
            self._gone()
        finally:
            with contextlib.suppress(OSError):
                self._sock.setblocking(False)

    def _readable(self) -> None:
        try:
            data = self._sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._gone()
            return
        self._buffer += data
        for message in _frames(self._buffer):
            self._on_message(message)

    def _on_message(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "forked":
            fut, mine = self._forks.pop(message["id"])
            if not fut.done():
                mine.setblocking(False)
                fut.set_result(Forked(pid=message["pid"], sock=mine))
        elif op == "failed":
            fut, mine = self._forks.pop(message["id"])
            mine.close()
            if not fut.done():
                fut.set_exception(OSError(f"the template could not fork: {message['error']}"))
        elif op == "exited":
            status = int(message["status"])
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
            self._exited(ChildExit(pid=int(message["pid"]), exit_code=code, signal=sig))

    def _exited(self, ended: ChildExit) -> None:
        self._exits[ended.pid] = ended  # it may come before the process's end of file
        while len(self._exits) > _MAX_EXITS:
            self._exits.popitem(last=False)
        waiter = self._exit_waiters.pop(ended.pid, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def exit_of(self, pid: int, within_s: float) -> ChildExit | None:
        """How call process ``pid`` ended; ``None`` if not told within ``within_s``."""
        if pid not in self._exits and self.alive:
            waiter = self._exit_waiters.setdefault(pid, asyncio.get_running_loop().create_future())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), within_s)
            self._exit_waiters.pop(pid, None)
        return self._exits.pop(pid, None)

    def _gone(self) -> None:
        if not self.alive:
            return
        self.alive = False
        for fut, mine in self._forks.values():
            mine.close()
            if not fut.done():
                fut.set_exception(OSError("the template process is gone"))
        self._forks.clear()
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._sock.fileno())

    def close(self) -> None:
        """Hang up: the template kills every call process it forked and exits."""
        self._gone()
        with contextlib.suppress(OSError):
            self._sock.close()
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=5)


_BOOT = "import sys; from toolray.isolation._template import main; main(sys.argv[1:])"


# ---------------------------------------------------------------------- template side
class _Server:
    """The template's loop: preload, fork, reap, report."""

    def __init__(self, sock: socket.socket, memory_mb: int) -> None:
        self.sock = sock
        self.memory_mb = memory_mb
        self.defs: OrderedDict[str, Any] = OrderedDict()
        self.children: set[int] = set()
        self.buffer = bytearray()
        self.fds: list[int] = []
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)

    def run(self) -> NoReturn:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.selector.register(self.sock, selectors.EVENT_READ, "control")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "child")
        while True:
            for key, _ in self.selector.select():
                if key.data == "child":
                    with contextlib.suppress(BlockingIOError):
                        os.read(self.wake_r, 4096)
                    self.reap()
                elif not self.control():
                    self.stop()
            self.reap()

    def control(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 16, 16)
        except InterruptedError:
            return True
        self.fds.extend(fds)
        if not data:
            return False
        self.buffer += data
        for message in _frames(self.buffer):
            if message["op"] == "preload":
                self.preload(message["key"], message["blob"])
            elif message["op"] == "fork":
                self.fork(message["id"], self.fds.pop(0))
        return True

    def preload(self, key: str, blob: str) -> None:
        try:
            self.defs[key] = cloudpickle.loads(base64.b64decode(blob)).execute
        except Exception:  # the call process reports it missing; the worker resends
            return
        if len(self.defs) > _MAX_DEFS:
            self.defs.popitem(last=False)

    def fork(self, ident: int, fd: int) -> None:
        try:
            pid = os.fork()
        except OSError as err:
            os.close(fd)
            self.sock.sendall(_frame({"op": "failed", "id": ident, "error": str(err)}))
            return
        if pid == 0:
            self.become_child(fd)
        os.close(fd)
        self.children.add(pid)
        self.sock.sendall(_frame({"op": "forked", "id": ident, "pid": pid}))

    def become_child(self, fd: int) -> NoReturn:
        try:
            parent = os.getppid()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            self.selector.close()
            for own in (self.wake_r, self.wake_w, *self.fds):
                os.close(own)
            self.sock.close()
            os.setpgid(0, 0)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != parent:  # the template died in between
                os._exit(1)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            allowance = self.memory_mb * 2**20
            limit = _data_size() + allowance
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
            sock = socket.socket(fileno=fd)
        except BaseException:
            os._exit(1)
        from ._child import serve

        serve(sock, self.defs, allowance=allowance)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.children.discard(pid)
            with contextlib.suppress(OSError):
                self.sock.sendall(_frame({"op": "exited", "pid": pid, "status": status}))

    def stop(self) -> NoReturn:
        for pid in self.children:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        os._exit(0)


def _data_size() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def main(argv: list[str]) -> NoReturn:
    """The template process: ``argv`` is the control socket's fd and the memory allowance."""
    sock = socket.socket(fileno=int(argv[0]))
    sock.setblocking(True)
    _Server(sock, int(argv[1])).run()
