"""Batches one driver submits to one executor actor within one loop tick leave as one message.

Every batch needs a reservation and a stream back. Sent alone, that is two remote calls and
at least one stream item per batch, each ~1 ms of CPU on both ends: a shard serving
thousands of scopes spends its time on messages. :class:`Submissions` holds the batches
bound for one actor until the end of the tick, then sends their reservation as one
``reserve(*ids)`` and the batches as one streaming ``run_batches``, whose merged chunks a
reader task hands to each batch's :class:`Inbox`. A lone batch goes as before
(``reserve`` + ``run_batch``), without the reader's hop.

Failures keep their meaning per batch: a reservation that fails fails every batch of the
group before anything ran (each caller retries on a new actor); a death of the actor, or the
stream's end before a batch's end record, reaches every batch still open, as it would reach
each alone; a batch's own error (``BatchFailed``) reaches that batch only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import ray.exceptions as rex

from toolray_actors._errors import is_actor_death
from toolray_actors._remote import Handle, send, stream
from toolray_actors._wire import BatchFailed, MuxChunk, StreamEnd, StreamItem, unknown
from toolray_actors.execution._executor_actor import BatchSpec, ExecutorActor

if TYPE_CHECKING:
    import ray

__all__ = ("MAX_GROUP", "Inbox", "Submissions")

MAX_GROUP = 256
"""At most this many batches share one message (a bigger tick starts another group)."""


class _Ended:
    """The group's stream ended without this batch's end record."""


_ENDED = _Ended()


class Inbox:
    """One batch's items, as its group's reader routes them (or its lone stream)."""

    def __init__(self, lone: AsyncIterator[ray.ObjectRef[StreamItem]] | None = None) -> None:
        self._lone = lone
        self._queue: asyncio.Queue[StreamItem | BaseException | _Ended] = asyncio.Queue()
        self.open = True

    def put(self, item: StreamItem | BaseException | _Ended) -> None:
        if self.open:
            self.open = not isinstance(item, (StreamEnd, BaseException, _Ended))
            self._queue.put_nowait(item)

    def take(self, entries: list[StreamItem | BatchFailed]) -> None:
        """A merged chunk's items of this batch (its own error becomes its end)."""
        for entry in entries:
            match entry:
                case BatchFailed(error):
                    self.put(error)
                case _:
                    self.put(entry)

    async def items(self) -> AsyncIterator[StreamItem]:
        """The batch's stream items; a Ray error or the batch's own error is raised."""
        if self._lone is not None:
            async for ref in self._lone:
                yield await ref
            return
        while True:
            item = await self._queue.get()
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, _Ended):
                return
            yield item


class _Group:
    """The batches bound for one actor in one tick."""

    def __init__(self, actor: Handle) -> None:
        self.actor = actor
        self.specs: list[BatchSpec] = []
        self.inboxes: dict[str, Inbox] = {}
        self.reserved: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.reserved.add_done_callback(_retrieved)  # its callers may all be gone
        self.sent = False


class Submissions:
    """Per executor actor name and event loop, the group of batches gathered in this tick."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, asyncio.AbstractEventLoop], _Group] = {}
        self._readers: set[asyncio.Task[None]] = set()
        self.messages = 0
        """Groups sent (each: one reservation and one batch stream)."""

    async def submit(self, name: str, actor: Handle, spec: BatchSpec) -> Inbox:
        """Send ``spec`` to ``actor`` with the batches of this tick; its inbox once reserved.

        Raises what the reservation raised (nothing of the batch ran then). A caller
        cancelled while it waits takes its batch out, or cancels it once sent.
        """
        loop = asyncio.get_running_loop()  # a group, and its futures, belong to one loop
        key = (name, loop)
        group = self._open.get(key)
        if group is None or group.actor is not actor or len(group.specs) >= MAX_GROUP:
            group = self._open[key] = _Group(actor)
            loop.call_soon(self._flush, key, group)
        group.specs.append(spec)
        inbox = group.inboxes[spec.batch_id] = Inbox()
        try:
            await asyncio.shield(group.reserved)
        except asyncio.CancelledError as err:
            if not group.sent:
                group.specs.remove(spec)
                del group.inboxes[spec.batch_id]
            else:
                send(actor, ExecutorActor.cancel, spec.batch_id, repr(err) or "cancelled")
            raise
        return group.inboxes.get(spec.batch_id, inbox)

    def _flush(self, key: tuple[str, asyncio.AbstractEventLoop], group: _Group) -> None:
        if self._open.get(key) is group:
            del self._open[key]
        group.sent = True
        if not group.specs:
            group.reserved.set_result(None)
            return
        self.messages += 1
        actor, specs = group.actor, tuple(group.specs)
        reserved = send(actor, ExecutorActor.reserve, *(spec.batch_id for spec in specs))
        match specs:
            case (spec,):
                lone = stream(actor, ExecutorActor.run_batch, spec)
                group.inboxes[spec.batch_id] = Inbox(lone)
            case _:
                chunks = stream(actor, ExecutorActor.run_batches, specs)
                reader = asyncio.ensure_future(_read(chunks, group.inboxes))
                self._readers.add(reader)
                reader.add_done_callback(self._readers.discard)
        waiter = asyncio.ensure_future(_reservation(reserved, actor, specs))
        waiter.add_done_callback(lambda done: _settle(group.reserved, done))


async def _reservation(
    reserved: ray.ObjectRef[bool], actor: Handle, specs: tuple[BatchSpec, ...]
) -> None:
    try:
        await reserved
    except rex.RayError as err:
        if not is_actor_death(err):  # the actor lives: its batches must not run unreserved
            for spec in specs:
                send(actor, ExecutorActor.cancel, spec.batch_id, "the batch's reservation failed")
        raise


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _settle(future: asyncio.Future[None], done: asyncio.Future[None]) -> None:
    if future.done():
        return
    if done.cancelled():
        future.cancel()
    elif (err := done.exception()) is not None:
        future.set_exception(err)
    else:
        future.set_result(None)


async def _read(chunks: AsyncIterator[ray.ObjectRef[MuxChunk]], inboxes: dict[str, Inbox]) -> None:
    """Route a group's merged chunks to each batch's inbox, then end every open one."""
    end: BaseException | _Ended = _ENDED
    try:
        async for ref in chunks:
            chunk = await ref
            match chunk:
                case MuxChunk(items):
                    for batch_id, entries in items.items():
                        if (inbox := inboxes.get(batch_id)) is not None:
                            inbox.take(entries)
                case _:
                    unknown(chunk, "a merged batch stream")
    except Exception as err:  # the actor's death, or another failure: every open batch's
        end = err
    except asyncio.CancelledError:  # the driver's loop is closing
        end = asyncio.CancelledError()
        raise
    finally:
        for inbox in inboxes.values():
            inbox.put(end)
