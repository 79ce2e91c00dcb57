"""A call process as its worker sees it: its pid, and a framed socket on the event loop.

Reading is event-driven (``loop.add_reader``); writing never blocks the loop: what the
socket does not take at once is buffered and flushed when it becomes writable, so frames
stay in order. End of file — the process died, was killed or exited — is reported once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from typing import Any

from ._messages import FrameReader, Message, encode
from ._template import Forked

__all__ = ("ProcessLink",)


class ProcessLink:
    """One call process: send frames to it, get its frames and its end through callbacks."""

    def __init__(
        self,
        child: Forked,
        *,
        known: set[str],
        on_message: Callable[[ProcessLink, Message], None],
        on_end: Callable[[ProcessLink], None],
    ) -> None:
        self.pid = child.pid
        self.known = known
        """Definition keys this process holds (preloaded by its template, or sent to it)."""
        self.call: Any = None
        """The call it runs now (the owner's record), or ``None`` when idle."""
        self.killed = False
        """Killed on request (the ladder's last step), not died on its own."""
        self.ended = False
        self.idle_since = 0.0
        self._sock = child.sock
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
        except Exception:  # a process that breaks the protocol is done
            self.kill()
            return
        for message in messages:
            self._on_message(self, message)

    def kill(self) -> None:
        """SIGKILL the process's group (whatever its body started goes too); then close."""
        with contextlib.suppress(OSError):
            os.killpg(self.pid, signal.SIGKILL)
        self.close()

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
        with contextlib.suppress(OSError):
            self._sock.close()
        self._on_end(self)
