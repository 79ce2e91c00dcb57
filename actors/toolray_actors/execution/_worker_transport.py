"""How an executor's runner reaches one worker actor: its local lane once open, else Ray.

A worker's first message goes as a Ray actor call (``run_wire`` for a lone call,
``run_many_wire`` for several) while the executor asks the worker for its lane
(``ToolWorker.lane``, answered only on the executor's own node) and connects; every later
message goes on the lane (:mod:`._lane`). A lane that ends — the worker died or was
killed — is not opened again: the messages after it go as Ray calls, which report the
worker's death as they always did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from toolray import ToolWorkerLostError
from toolray.isolation import outcomes_of
from toolray_actors._executor_wire import CallOverdue
from toolray_actors._remote import Handle, send, stream
from toolray_actors._wire import Settled, WorkerRequest, encode

from ._coalesce import Chunk
from ._lane import LaneClient
from ._worker import ToolWorker

__all__ = ("WorkerTransport",)

_log = logging.getLogger("toolray")


class WorkerTransport:
    """A coalescing :class:`~._coalesce.Transport` to one worker.

    ``node`` is this executor's node (``None``: the lane is off, every message is a Ray
    call); ``count(local)`` is told of every message sent.
    """

    def __init__(self, handle: Handle, node: str | None, count: Callable[[bool], None]) -> None:
        self._handle = handle
        self._node = node
        self._count = count
        self._client: LaneClient | None = None
        self._opening: asyncio.Task[None] | None = None

    def __call__(self, requests: list[WorkerRequest]) -> AsyncIterator[Chunk]:
        client = self._client
        if client is not None and not client.closed:
            self._count(True)
            return _chunks(client.deliver(encode(requests)))
        if self._node is not None and self._opening is None:
            self._opening = asyncio.ensure_future(self._open(self._node))
        self._count(False)
        handle = self._handle
        match requests:
            case [request] if "timeout_s" not in request.ident:  # nothing to say meanwhile
                return _one(send(handle, ToolWorker.run_wire, encode(request)))
        return _many(stream(handle, ToolWorker.run_many_wire, encode(requests)))

    def lane(self) -> LaneClient | None:
        """The open local lane (``None``: none yet, or none at all: use Ray); asks for it once."""
        client = self._client
        if client is not None and not client.closed:
            return client
        if self._node is not None and self._opening is None:
            self._opening = asyncio.ensure_future(self._open(self._node))
        return None

    async def _open(self, node: str) -> None:
        try:
            address = await send(self._handle, ToolWorker.lane, node)
            if address is not None:
                self._client = await LaneClient.connect(address, self._lost)
        except Exception:  # the worker is gone, or its lane cannot be reached: Ray it is
            _log.debug("toolray: no local lane to a worker", exc_info=True)

    async def _lost(self) -> BaseException:
        """Why the lane ended: the error a Ray call to the worker gives now."""
        try:
            await send(self._handle, ToolWorker.health)
        except Exception as err:  # its death, as a message on Ray would have reported it
            return err
        return ToolWorkerLostError("the worker's local lane closed while the worker lived")


def _settled(blob: bytes) -> Chunk:
    """A worker's reply, read as data: its bodies may share its process (``"shared"``).

    An outcome of ``None`` is a call's word that its body ran its whole budget.
    """
    return [
        Settled(token, outcome) if outcome is not None else CallOverdue(token)
        for token, outcome in outcomes_of(blob)
    ]


async def _one(ref: Any) -> AsyncIterator[Chunk]:
    yield _settled(await ref)


async def _many(refs: AsyncIterator[Any]) -> AsyncIterator[Chunk]:
    async for ref in refs:
        yield _settled(await ref)


async def _chunks(items: AsyncIterator[bytes]) -> AsyncIterator[Chunk]:
    async for item in items:
        yield _settled(item)
