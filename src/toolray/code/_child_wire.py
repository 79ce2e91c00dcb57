"""The child's end of the frame protocol: length-prefixed JSON over its socket to the host.

Standard library only, loaded by path with ``_child.py`` (see ``toolray.code``). Reads go
into one reused buffer (64 KiB: a larger read buffer is mapped and unmapped by the C library
on every read), the rest of a larger frame at once; JSON is the standard library's, its C
encoder made directly (``JSONEncoder.encode`` costs about three times as much per frame). A
lone call's reply is polled for a moment before the child blocks on the socket.
"""

from __future__ import annotations

import json
import os
import select
import struct
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolray.code import _child_guard as guard
else:  # loaded by path: the sibling files are not on sys.path by themselves
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _child_guard as guard

    del sys.path[0]

HEADER = struct.Struct(">I")
MAX_FRAME = 16 * 1024 * 1024
READ_CHUNK = 64 * 1024
SPIN_S = 200e-6
"""How long a lone call polls for its reply before it blocks (see :meth:`Wire.wait_readable`)."""
SPIN_BACKOFF = 16
"""Waits that block at once after a poll that saw no reply (a slow tool), then it polls again."""
SPINS = len(os.sched_getaffinity(0)) > 1
"""Whether polling can help: another core runs the host meanwhile."""
_clock = time.perf_counter  # bound now: the program may replace the module's attributes
_select = select.select


def _compact_json() -> Callable[[Any], str]:
    """Compact JSON text: the C encoder made directly (as ``toolray.procs`` does)."""
    slow = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    strings = json.encoder.encode_basestring
    if make is None:
        return slow.encode

    def compact(message: Any) -> str:
        chunks = make({}, slow.default, strings, None, ":", ",", False, False, False)(message, 0)
        return "".join(chunks)

    return compact


_compact = _compact_json()
_decode = json.JSONDecoder().decode


def encode(message: dict[str, Any]) -> bytes:
    return _compact(message).encode()


class Wire:
    """Length-prefixed JSON frames over the child's socket to the host."""

    def __init__(self, channel: int) -> None:
        # The protocol socket stays on its own descriptor; fd 1 points at stderr and fd 0
        # at /dev/null, so stray writes from the program cannot corrupt a frame.
        self.in_fd = self.out_fd = channel
        os.dup2(2, 1)
        self._buffer = bytearray()
        self._early: list[dict[str, Any]] = []  # frames read with the one asked for
        self._inbox = memoryview(bytearray(READ_CHUNK))  # reused: no allocation per read
        self._skip_spins = 0

    def send(self, message: dict[str, Any], payload: bytes | None = None) -> None:
        if payload is None:
            payload = encode(message)
        data = HEADER.pack(len(payload)) + payload
        try:
            while data:
                try:
                    data = data[os.write(self.out_fd, data) :]
                except BlockingIOError:  # the socket is non-blocking while the loop runs
                    select.select([], [self.out_fd], [])
        except OSError:
            os._exit(guard.EXIT_HOST_GONE)

    def feed(self, data: bytes | memoryview) -> list[dict[str, Any]]:
        self._buffer += data
        frames, self._early = self._early, []
        while len(self._buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self._buffer)
            if len(self._buffer) < HEADER.size + size:
                break
            payload = self._buffer[HEADER.size : HEADER.size + size]
            del self._buffer[: HEADER.size + size]
            frames.append(_decode(payload.decode("utf-8", "surrogatepass")))
        return frames

    def receive(self) -> bytes | memoryview:
        """The next bytes from the host (empty: it is gone); a view valid until the next."""
        wanted = self.wanted()
        if wanted > READ_CHUNK:  # the rest of a large frame, at once
            return os.read(self.in_fd, wanted)
        return self._inbox[: os.readv(self.in_fd, [self._inbox])]

    def wanted(self) -> int:
        """Bytes to read next: a chunk, or the rest of a larger frame at once."""
        if len(self._buffer) < HEADER.size:
            return READ_CHUNK
        size: int = HEADER.unpack_from(self._buffer)[0]
        return max(READ_CHUNK, HEADER.size + size - len(self._buffer))

    def wait_readable(self) -> None:
        """Until the host's socket is readable: polled for up to :data:`SPIN_S` first.

        A reply to a lone call usually comes within it, and blocking at once lets this core
        go idle, which the host's reply must then wake: on a virtual machine that costs tens
        of microseconds each way, more than the poll. A poll that sees no reply (a slow tool)
        makes the next :data:`SPIN_BACKOFF` waits block at once, so a slow tool costs the
        program's CPU budget at most one poll per that many calls.
        """
        if self._skip_spins:
            self._skip_spins -= 1
        elif SPINS:
            end = _clock() + SPIN_S
            while not _select([self.in_fd], [], [], 0)[0]:
                if _clock() > end:
                    self._skip_spins = SPIN_BACKOFF
                    break
            else:
                return
        _select([self.in_fd], [], [])

    def read_blocking(self, idle_s: float) -> dict[str, Any]:
        if self._early:
            return self._early.pop(0)
        while True:
            readable, _, _ = select.select([self.in_fd], [], [], idle_s)
            if not readable:
                os._exit(guard.EXIT_EXPIRED)  # a warm child lives at most its time to live
            data = self.receive()
            if not data:
                os._exit(guard.EXIT_HOST_GONE)
            frames = self.feed(data)
            if frames:
                self._early = frames[1:]  # never dropped, whatever came with it
                return frames[0]
