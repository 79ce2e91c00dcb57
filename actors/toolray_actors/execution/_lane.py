"""The local lane: an executor's call messages to a worker on its own node, on a unix socket.

A Ray actor call costs about 1.3 ms of round trip on a busy two-core node (each side's core
worker, its RPC and the hand-over to the actor's loop thread); the same bytes between the
two processes' event loops on a unix socket cost about 0.1 ms. So an executor actor sends a
worker on its own node the call messages a Ray call would carry — the bytes
``ToolWorker.run_many_wire`` takes, and the chunks it yields — and its environment
instances' verbs (:mod:`._env_lane`) on a socket the worker opens when the executor first
asks (``ToolWorker.lane``). Everything else stays a Ray actor call:
aborts, interrupts and kills (the worker's control lane, which answers while its default
loop is busy, and which already copes with an abort that arrives before its call), chains,
preparation, statistics; and so does every call to a worker on another node.

The socket is in the Linux abstract namespace (no file to leave behind; per network
namespace, so a Code Mode program, in a namespace of its own, cannot even see it) under a
random name. The worker serves a connection only from a process of its own user
(``SO_PEERCRED``) whose first frame is the 32-byte secret it gave the executor through Ray,
and answers that frame before the executor sends any message: a connection the worker
refuses or drops before then (its loop too busy to read the hello in time) loses nothing,
its messages simply go as Ray calls.

Frames: a 9-byte header (payload length, kind, message id), then the payload. The client
sends ``HELLO`` once and waits for the worker's empty ``HELLO``, then sends one ``RUN`` per
message; the worker answers each message with its ``CHUNK`` frames as outcomes settle and
one ``END`` (``FAIL`` if the message itself failed). An ``ENV`` message (an environment
instance's verb, :mod:`._env_lane`) is answered with one ``CHUNK`` and its ``END``.
When the connection ends — the worker died, was killed or closed it — every message still
open fails with the error a Ray call to that worker gives at that moment (its death,
usually), so the runner decides exactly as for a Ray message.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import logging
import os
import socket
import struct
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass

__all__ = ("LANES", "LaneAddress", "LaneClient", "LaneError", "LaneServer")

LANES = sys.platform.startswith("linux")
"""Abstract unix sockets and ``SO_PEERCRED`` are Linux's: elsewhere every message is a Ray call."""

_HEADER = struct.Struct("!IBI")
HELLO, RUN, CHUNK, END, FAIL, _LOST, ENV = range(1, 8)
_SECRET_BYTES = 32
_HELLO_S = 30.0
"""A connection that has not said its secret within this long is closed (and a client whose
hello is not answered within this long gives up: its messages go as Ray calls)."""
_MAX_FRAME = 1 << 30
"""A frame longer than this breaks the protocol (the connection is closed)."""
_MAX_PEERS = 512
"""Connections a worker serves at once; an executor asking beyond them uses Ray."""
_HIGH_WATER = 1 << 20
"""Bytes queued on a connection above which a message waits for the socket to drain."""

_log = logging.getLogger("toolray")


class LaneError(RuntimeError):
    """A lane message failed in the worker, or the lane broke its protocol."""


@dataclass(frozen=True, slots=True)
class LaneAddress:
    """Where a worker's lane listens, and the secret that opens it."""

    node: str
    """The worker's node (an executor on another node uses Ray)."""
    name: bytes
    """The socket's abstract name (with its leading NUL byte)."""
    secret: bytes


def frame(kind: int, message: int, payload: bytes = b"") -> bytes:
    """One frame's bytes."""
    return _HEADER.pack(len(payload), kind, message) + payload


async def read_frame(
    reader: asyncio.StreamReader, limit: int = _MAX_FRAME
) -> tuple[int, int, bytes] | None:
    """The next frame (kind, message id, payload); ``None`` at a clean end of the stream.

    A frame longer than ``limit`` is refused before its payload is read.
    """
    try:
        head = await reader.readexactly(_HEADER.size)
    except asyncio.IncompleteReadError as err:
        if err.partial:
            raise LaneError("the lane ended inside a frame") from None
        return None
    length, kind, message = _HEADER.unpack(head)
    if length > limit:
        raise LaneError(f"a lane frame of {length} bytes")
    return kind, message, (await reader.readexactly(length) if length else b"")


def _connected(name: bytes) -> socket.socket:
    """A socket connected to the abstract ``name``, made here.

    uvloop (Ray's loop for async actors when it is installed) refuses an abstract name given
    as a path.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.setblocking(False)
        sock.connect(name)  # a unix socket connects at once, or refuses (backlog full)
    except BaseException:
        sock.close()
        raise
    return sock


def _same_user(sock: socket.socket | None) -> bool:
    if sock is None:
        return False
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


class LaneServer:
    """A worker's end: serves ``run`` (the worker's ``run_many_wire``) to its executors.

    ``env`` answers an ``ENV`` message (``None``: such a message breaks the protocol).
    """

    def __init__(
        self,
        run: Callable[[bytes], AsyncIterator[bytes]],
        env: Callable[[bytes], Awaitable[bytes]] | None = None,
    ) -> None:
        self._run = run
        self._env = env
        self._secret = os.urandom(_SECRET_BYTES)
        self._name = b"\0toolray-lane-" + os.urandom(16).hex().encode()
        self._server: asyncio.AbstractServer | None = None
        self._peers: set[asyncio.StreamWriter] = set()
        self._verbs: set[asyncio.Task[None]] = set()
        self.connections = 0
        """Connections that said the secret."""
        self.messages = 0

    @property
    def full(self) -> bool:
        """Whether it serves as many connections as it may (a new executor uses Ray)."""
        return len(self._peers) >= _MAX_PEERS

    async def open(self, node: str) -> LaneAddress:
        """Listen (once, on the running loop); the address an executor connects to."""
        if self._server is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.bind(self._name)
            except OSError:
                sock.close()
                raise
            self._server = await asyncio.start_unix_server(self._serve, sock=sock)
        return LaneAddress(node, self._name, self._secret)

    def close(self) -> None:
        """Stop listening and end every connection (their messages are abandoned)."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._peers):
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks: set[asyncio.Task[None]] = set()
        self._peers.add(writer)
        try:
            if not _same_user(writer.get_extra_info("socket")):
                return
            hello = await asyncio.wait_for(read_frame(reader, _SECRET_BYTES), _HELLO_S)
            if hello is None:
                return
            kind, _, secret = hello
            if kind != HELLO or not hmac.compare_digest(secret, self._secret):
                return
            self.connections += 1
            writer.write(frame(HELLO, 0))  # the client sends no message before this answer
            while (got := await read_frame(reader)) is not None:
                kind, message, payload = got
                if kind == RUN:
                    work, held = self._message(writer, message, payload), tasks
                elif kind == ENV and self._env is not None:  # runs to its end, as on Ray
                    work, held = self._answer(writer, message, self._env(payload)), self._verbs
                else:
                    return
                self.messages += 1
                task = asyncio.ensure_future(work)
                held.add(task)
                task.add_done_callback(held.discard)
        except Exception:  # a peer that breaks the protocol, or goes: its connection ends
            _log.debug("toolray: a lane connection ended", exc_info=True)
        finally:
            for task in tasks:  # its executor is gone: its calls are abandoned, as on Ray
                task.cancel()
            self._peers.discard(writer)
            writer.close()

    async def _message(self, writer: asyncio.StreamWriter, message: int, payload: bytes) -> None:
        try:
            async for chunk in self._run(payload):
                writer.write(frame(CHUNK, message, chunk))
                transport = writer.transport
                if transport.get_write_buffer_size() > _HIGH_WATER:
                    await writer.drain()
        except Exception as err:
            text = f"{type(err).__name__}: {err}"
            writer.write(frame(FAIL, message, text.encode(errors="replace")))
        else:
            writer.write(frame(END, message))

    async def _answer(
        self, writer: asyncio.StreamWriter, message: int, work: Awaitable[bytes]
    ) -> None:
        try:
            reply = await work
        except Exception as err:
            text = f"{type(err).__name__}: {err}"
            reply_frame = frame(FAIL, message, text.encode(errors="replace"))
        else:
            reply_frame = frame(CHUNK, message, reply) + frame(END, message)
        if writer.is_closing():  # its executor went: the verb ran to its end all the same
            return
        writer.write(reply_frame)
        if writer.transport.get_write_buffer_size() > _HIGH_WATER:
            await writer.drain()


class LaneClient:
    """An executor's connection to one worker's lane: messages out, their chunks back.

    ``lost`` tells why the lane ended (asked once, when an open message finds it ended):
    the error a Ray call to the worker gives now.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        lost: Callable[[], Awaitable[BaseException]],
    ) -> None:
        self._writer = writer
        self._lost = lost
        self._cause: asyncio.Future[BaseException] | None = None
        self._open: dict[int, asyncio.Queue[tuple[int, bytes]]] = {}
        self._ids = itertools.count(1)
        self.closed = False
        self._reading = asyncio.ensure_future(self._read(reader))

    @classmethod
    async def connect(
        cls, address: LaneAddress, lost: Callable[[], Awaitable[BaseException]]
    ) -> LaneClient:
        """Connect to ``address`` and say its secret."""
        reader, writer = await asyncio.open_unix_connection(sock=_connected(address.name))
        try:  # nothing is sent before the worker took the secret: a refusal loses nothing
            if not _same_user(writer.get_extra_info("socket")):  # not the worker's: leave
                raise LaneError("the lane's listener is not this user's process")
            writer.write(frame(HELLO, 0, address.secret))
            answer = await asyncio.wait_for(read_frame(reader, 0), _HELLO_S)
            if answer is None:
                raise LaneError("the worker did not open its lane")
            kind, _, _ = answer
            if kind != HELLO:
                raise LaneError("the worker did not open its lane")
        except BaseException:
            writer.close()
            raise
        return cls(reader, writer, lost)

    def deliver(self, payload: bytes, kind: int = RUN) -> AsyncGenerator[bytes, None]:
        """Send one message now; its reply chunks as they come."""
        message = next(self._ids) & 0xFFFFFFFF
        queue: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self._open[message] = queue
        if self.closed:
            queue.put_nowait((_LOST, b""))
        else:
            self._writer.write(frame(kind, message, payload))
        return self._replies(message, queue)

    async def ask(self, payload: bytes) -> bytes:
        """Send one ``ENV`` message; its one reply."""
        replies = self.deliver(payload, ENV)
        try:
            async for reply in replies:
                return reply
        finally:
            await replies.aclose()
        raise LaneError("the worker answered nothing")

    async def _replies(
        self, message: int, queue: asyncio.Queue[tuple[int, bytes]]
    ) -> AsyncGenerator[bytes, None]:
        try:
            while True:
                kind, data = await queue.get()
                if kind == CHUNK:
                    yield data
                elif kind == END:
                    return
                elif kind == FAIL:
                    raise LaneError(data.decode(errors="replace"))
                else:
                    raise await self._why()
        finally:
            self._open.pop(message, None)

    async def _why(self) -> BaseException:
        if self._cause is None:
            self._cause = asyncio.ensure_future(self._lost())
        return await asyncio.shield(self._cause)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while (got := await read_frame(reader)) is not None:
                kind, message, payload = got
                queue = self._open.get(message)
                if queue is not None:
                    queue.put_nowait((kind, payload))
        except Exception:
            _log.debug("toolray: a lane to a worker broke", exc_info=True)
        finally:
            self.close()

    def close(self) -> None:
        """End the connection; every open message learns why."""
        if self.closed:
            return
        self.closed = True
        for queue in self._open.values():
            queue.put_nowait((_LOST, b""))
        with contextlib.suppress(Exception):
            self._writer.close()
