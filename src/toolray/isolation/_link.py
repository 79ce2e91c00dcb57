"""A call process as its worker sees it: a ``toolray.procs`` child, framed, on the loop.

Reading is event-driven (``loop.add_reader``); writing never blocks the loop: what the
socket does not take at once is buffered and flushed when it becomes writable, so frames
stay in order. End of file — the process died, was killed or exited — is reported once;
how it ended comes from its template (:meth:`ProcessLink.wait_exit`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from toolray.procs import Child, ExitStatus, Template, TemplateSpec

from ._child import MEMORY_EXIT
from ._messages import FrameReader, Message, encode

__all__ = ("ProcessLink", "call_template", "describe_exit")

_ZOMBIE_LOOKS = 5
_ZOMBIE_STEP_S = 0.002
"""A process whose end of file came looks for its zombie this often, this far apart."""


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except OSError:  # gone already (its end shows as end of file), or no pidfd here
        return None


def call_template(env: Mapping[str, str] | None = None) -> Template:
    """A template for call processes: this interpreter, environment (plus ``env``) and path.

    It preloads toolray's core (its entry's module); tools' and environments' definitions
    reach it later through ``template.load(key, blob)``. Fork with ``{"memory_mb": n}`` as
    the arguments for a call process, plus ``"instance": True`` for an environment
    instance's process.
    """
    spec = TemplateSpec(
        entry="toolray.isolation._entry:serve",
        loader="toolray.isolation._child:preload",
        env={**os.environ, **(env or {})},
        sys_path=tuple(p for p in sys.path if p),
        keeper=True,  # Ray's kill of a dying worker's children must not reach it
    )
    return Template(spec)


def describe_exit(status: ExitStatus | None, memory_mb: int) -> str:
    """How a call process ended, in words (for ``WORKER_LOST``'s message)."""
    if status is None:
        return "died (its end was not reported)"
    if status.lost:
        return "died with its template process"
    if status.signal is not None:
        name = status.describe().removeprefix("signal ")
        extra = " (out of memory?)" if status.signal == signal.SIGKILL else ""
        return f"was killed by {name}{extra}"
    if status.code == MEMORY_EXIT:
        return f"ran out of memory (its limit is {memory_mb} MB)"
    return f"exited with status {status.code}"


class ProcessLink:
    """One call process: send frames to it, get its frames and its end through callbacks."""

    def __init__(
        self,
        child: Child,
        *,
        known: set[str],
        on_message: Callable[[ProcessLink, Message], None],
        on_end: Callable[[ProcessLink], None],
    ) -> None:
        self.pid = child.pid
        self._pidfd = _pidfd(child.pid)  # a kill that never reaches a reused pid
        self._pidfd_lock = threading.Lock()  # a kill from another thread vs. the close
        self.known = known
        """Definition keys this process holds (preloaded by its template, or sent to it)."""
        self.call: Any = None
        """The call it runs now (the owner's record), or ``None`` when idle."""
        self.killed = False
        """Killed on request (the ladder's last step), not died on its own."""
        self.broken: str | None = None
        """How it broke the frame protocol (it was killed for it), in words."""
        self.workdir: str | None = None
        """A sandbox's scratch directory (removed once it ended)."""
        self.report: dict[str, Any] | None = None
        """A sandbox's confinement, once it said it is ready (``None``: not yet)."""
        self.bound: str | None = None
        """The definition key of the tool it ran a call of (``None``: fresh): it takes
        calls of that tool only."""
        self.ended = False
        self.idle_since = 0.0
        self._child = child
        self._sock = child.channel
        self._sock.setblocking(False)
        self._reader = FrameReader()
        self._out = bytearray()
        self._on_message = on_message
        self._on_end = on_end
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._sock.fileno(), self._readable)

    def send(self, message: Message) -> None:
        """Queue one frame (written now if the socket takes it)."""
        if self.ended:
            return
        data = encode(message)
        if not self._out:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                return  # its end shows as end of file on the reader
            data = data[sent:]
            if not data:
                return
            self._loop.add_writer(self._sock.fileno(), self._flush)
        self._out += data

    def _flush(self) -> None:
        try:
            sent = self._sock.send(self._out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            sent = len(self._out)
        del self._out[:sent]
        if not self._out:
            self._loop.remove_writer(self._sock.fileno())

    def _readable(self) -> None:
        try:
            data = self._sock.recv(1 << 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self.close()
            return
        try:
            messages = self._reader.feed(data)
        except Exception as err:  # a process that breaks the protocol is done
            self.broken = f"broke the protocol ({str(err)[:200]})"
            self.kill()
            return
        for message in messages:
            self._on_message(self, message)

    def kill(self) -> None:
        """SIGKILL the process and its group (whatever its body started); then close."""
        self.signal_kill()
        self.close()

    def signal_kill(self) -> None:
        """SIGKILL the process now, and its group through its template; from any thread.

        The process itself is signalled at once through its pidfd (a template busy loading
        a tool's code does not delay it); its group — what the body started — through the
        template, which never signals a pid it has already reaped. Its end arrives as end of
        file on its socket.
        """
        with self._pidfd_lock:
            if self._pidfd is not None:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        self._child.kill()

    async def wait_exit(self, within_s: float) -> ExitStatus | None:
        """How the process ended (``None`` if not known within ``within_s``).

        Read from the kernel while the process is a zombie (at once, usually: its end of
        file comes as it exits), else as its template reports it after reaping — which a
        busy template can delay past a short deadline of the call.
        """
        for _ in range(_ZOMBIE_LOOKS):
            status = self._child.zombie_status()
            if status is not None:
                return status
            await asyncio.sleep(_ZOMBIE_STEP_S)  # still exiting: a zombie in a moment
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self._child.wait_exit(), within_s)
        return self._child.status

    def close(self) -> None:
        """Stop reading and writing; report the end (once)."""
        if self.ended:
            return
        self.ended = True
        with contextlib.suppress(Exception):
            self._loop.remove_reader(self._sock.fileno())
        if self._out:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._sock.fileno())
        self._child.close()
        with self._pidfd_lock:
            fd, self._pidfd = self._pidfd, None
            if fd is not None:
                os.close(fd)
        self._on_end(self)
