"""Coalesced dispatch: the calls bound for one worker within one loop tick, in one message.

An :class:`Outbox` queues the requests bound for one destination (one worker actor) and
flushes them at the end of the scheduling tick (``loop.call_soon``): every request submitted
before the flush runs travels in the same message. While requests keep arriving in every
tick — a batch's scheduler starts a wide fan-out 16 calls per tick — the flush waits up to
``_MAX_DEFER`` more ticks, so such a fan-out travels in a few large messages.

The message's reply is a stream of outcome chunks ``[(token, outcome), …]`` — the worker
sends the outcomes that settle together in one chunk — and each request's future resolves
as soon as its own outcome arrives, so a slow call never holds back its mates. A chunk
may also carry the worker's word that a call's body ran its whole timeout budget
(``CallOverdue``), which goes to that request's ``on_overdue`` callback.

Per-call semantics stay per call:

- cancellation is addressed to a token (the worker's control lane), never to the message;
- if the reply stream fails (the worker died), every request of that message still waiting
  gets the error, and the caller decides what it means for its call (``WORKER_LOST``, or
  ``ABORTED`` for a call that was being cancelled); outcomes that arrived before stay.

Plain asyncio, no Ray: the transport is a :class:`Transport` callable, so the queue logic
is tested with fakes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from toolray.isolation import CallOutcome
from toolray_actors._executor_wire import CallOverdue
from toolray_actors._wire import AbortOrder, Settled, WorkerRequest, unknown

__all__ = (
    "AbortQueue",
    "Chunk",
    "Outbox",
    "OutboxStats",
    "Outcome",
    "StreamEnded",
    "Transport",
)

Outcome = CallOutcome
"""What the worker returns for one request."""

Chunk = Sequence[Settled | CallOverdue]
"""Outcomes that settled together (and the words of calls whose bodies overran)."""

OnOverdue = Callable[[], None]
"""Told when the worker says the call's body ran its whole timeout budget."""

_MAX_BATCH = 1024
"""A message never carries more requests than this (a flush happens at once when full)."""

_MAX_DEFER = 4
"""Ticks a flush may wait while requests keep arriving in every tick (a wide fan-out)."""


class Transport(Protocol):
    """Sends one message of requests; returns the stream of its outcome chunks.

    The message must be submitted before ``__call__`` returns (the stream is only read).
    """

    def __call__(self, requests: list[WorkerRequest]) -> AsyncIterator[Chunk]:
        """Submit ``requests`` as one message."""
        ...


class StreamEnded(RuntimeError):
    """The reply stream ended without this request's outcome."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxStats:
    """How many messages carried how many requests."""

    messages: int
    requests: int


def _retrieved(fut: asyncio.Future[Outcome]) -> None:
    # A caller that gave up on its call (killed worker) never reads the error: mark it read.
    if not fut.cancelled():
        fut.exception()


class Outbox:
    """The requests bound for one destination, flushed once per loop tick.

    Example:
        >>> async def demo(send):                           # doctest: +SKIP
        ...     box = Outbox(send)
        ...     a = box.submit(WorkerRequest("t1", "k", None, {}, {}))
        ...     b = box.submit(WorkerRequest("t2", "k", None, {}, {}))  # same message
        ...     return await a, await b
    """

    def __init__(self, send: Transport, *, max_batch: int = _MAX_BATCH) -> None:
        self._send = send
        self._max_batch = max(1, max_batch)
        self._pending: list[tuple[WorkerRequest, asyncio.Future[Outcome], OnOverdue | None]] = []
        self._scheduled = False
        self._seen = 0
        self._deferred = 0
        self._readers: set[asyncio.Task[None]] = set()
        self.messages = 0
        self.requests = 0

    @property
    def transport(self) -> Transport:
        """Where its messages go."""
        return self._send

    def submit(
        self, request: WorkerRequest, on_overdue: OnOverdue | None = None
    ) -> asyncio.Future[Outcome]:
        """Queue ``request`` for this tick's message; the future gets its outcome."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Outcome] = loop.create_future()
        fut.add_done_callback(_retrieved)
        self._pending.append((request, fut, on_overdue))
        if len(self._pending) >= self._max_batch:
            self.flush()
        elif not self._scheduled:
            self._scheduled = True
            self._seen, self._deferred = len(self._pending), 0
            loop.call_soon(self._tick)
        return fut

    def _tick(self) -> None:
        """End of a tick: flush, unless the queue is still growing (a fan-out in progress)."""
        if not self._scheduled:
            return
        if len(self._pending) > self._seen and self._deferred < _MAX_DEFER:
            self._seen = len(self._pending)
            self._deferred += 1
            asyncio.get_running_loop().call_soon(self._tick)
            return
        self.flush()

    def flush(self) -> None:
        """Send everything queued now, as one message (a no-op when nothing is queued)."""
        self._scheduled = False
        if not self._pending:
            return
        batch, self._pending = self._pending, []
        futures = {request.token: fut for request, fut, _ in batch}
        words = {request.token: told for request, _, told in batch if told is not None}
        self.messages += 1
        self.requests += len(batch)
        try:
            stream = self._send([request for request, _, _ in batch])
        except Exception as err:  # could not even submit: every request of it fails
            _fail(futures, err)
            return
        reader = asyncio.ensure_future(self._read(stream, futures, words))
        self._readers.add(reader)
        reader.add_done_callback(self._readers.discard)

    async def _read(
        self,
        stream: AsyncIterator[Chunk],
        futures: dict[str, asyncio.Future[Outcome]],
        words: dict[str, OnOverdue],
    ) -> None:
        try:
            async for chunk in stream:
                for entry in chunk:
                    match entry:
                        case Settled(token, outcome):
                            words.pop(token, None)
                            fut = futures.pop(token, None)
                            if fut is not None and not fut.done():
                                fut.set_result(outcome)
                        case CallOverdue(token):
                            if (on_overdue := words.get(token)) is not None:
                                on_overdue()
                        case _:
                            unknown(entry, "a worker's reply")
        except asyncio.CancelledError:
            _fail(futures, StreamEnded("the dispatch was shut down before this call settled"))
            raise
        except Exception as err:
            _fail(futures, err)
        else:
            _fail(futures, StreamEnded("the worker's reply ended without this call's outcome"))

    @property
    def waiting(self) -> int:
        """Requests queued and not yet sent."""
        return len(self._pending)

    def statistics(self) -> OutboxStats:
        """A frozen snapshot of the counters."""
        return OutboxStats(messages=self.messages, requests=self.requests)

    def close(self) -> None:
        """Stop reading every reply (their waiting requests fail with ``StreamEnded``)."""
        for reader in list(self._readers):
            reader.cancel()


def _fail(futures: dict[str, asyncio.Future[Outcome]], err: BaseException) -> None:
    for fut in futures.values():
        if not fut.done():
            fut.set_exception(err)
    futures.clear()


class AbortQueue:
    """The aborts bound for one worker within one tick, in one control-lane message.

    A batch aborted by its signal aborts all its running calls in the same tick; sending
    their tokens together stops the bodies of one worker together, so their outcomes
    settle together too (one reply chunk). Each abort still names its own call.
    """

    def __init__(
        self,
        send_one: Callable[[AbortOrder], object],
        send_many: Callable[[list[AbortOrder]], object],
    ) -> None:
        self._send_one = send_one
        self._send_many = send_many
        self._pending: list[AbortOrder] = []

    def put(self, order: AbortOrder) -> None:
        """Queue an abort (``order``); it leaves at the end of this tick."""
        if not self._pending:
            asyncio.get_running_loop().call_soon(self.flush)
        self._pending.append(order)

    def flush(self) -> None:
        """Send the queued aborts (one message)."""
        items, self._pending = self._pending, []
        match items:
            case [order]:
                self._send_one(order)
            case [_, _, *_]:
                self._send_many(items)
