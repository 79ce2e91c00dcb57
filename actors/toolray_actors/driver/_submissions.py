"""Batches one driver submits to one executor actor within one loop tick leave as one message.

Every batch needs a stream back, and the driver must be able to tell, if the actor dies,
whether the batch started. Sent alone, a batch is at least one remote call and one stream
item, each ~1 ms of CPU on both ends: a shard serving thousands of scopes spends its time
on messages. :class:`Submissions` holds the batches bound for one actor until the end of
the tick, then sends them as one streaming ``run_batches_wire``, whose merged chunks a
reader task hands to each batch's :class:`Inbox`. A lone batch goes as ``run_batch_wire``,
without the reader's hop (a one-call batch read at its end: ``run_small_wire``, a plain
reply instead of a stream); so does every batch of a group that could not be sent as one
(a batch Ray cannot serialize then fails alone).

Each batch carries a :class:`~toolray_actors.driver._unstarted.Ticket`, its number in the
actor's ledger (``toolray_actors._ledger``): after the actor's death it tells whether the
batch started. An actor that keeps no ledger for this driver gets the older proof instead,
a reservation (``reserve(*ids)``) sent just before the batches, whose failure fails every
batch of the group before anything ran. A death of the actor, or the stream's end before a
batch's end record, reaches every batch still open, as it would reach each alone; a batch's
own error (``BatchFailed``) reaches that batch only.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, cast

import ray.exceptions as rex

from toolray_actors._errors import is_actor_death
from toolray_actors._ledger import DRIVER, next_ticket, stamped
from toolray_actors._remote import Handle, send, stream
from toolray_actors._wire import (
    BatchFailed,
    MuxChunk,
    StreamEnd,
    StreamItem,
    decode,
    encode,
    unknown,
)
from toolray_actors.execution._executor_actor import BatchSpec, ExecutorActor

from ._unstarted import LedgerRef, Ticket

if TYPE_CHECKING:
    import ray

__all__ = ("MAX_GROUP", "Inbox", "Submissions")

_log = logging.getLogger("toolray")

MAX_GROUP = 256
"""At most this many batches share one message (a bigger tick starts another group)."""


class _Ended:
    """The group's stream ended without this batch's end record."""


_ENDED = _Ended()


class Inbox:
    """One batch's items, as its group's reader routes them (or its lone stream)."""

    def __init__(
        self, lone: AsyncIterator[ray.ObjectRef[bytes]] | None = None, ticket: Ticket | None = None
    ) -> None:
        self._lone = lone
        self.ticket = ticket
        """A batch sent unreserved: its number in the actor's ledger."""
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
                yield cast("StreamItem", decode(await ref))
            return
        while True:
            item = await self._queue.get()
            if isinstance(item, BaseException):  # one error may reach many batches:
                raise item.with_traceback(None)  # none keeps the others' frames alive
            if isinstance(item, _Ended):
                return
            yield item
            if isinstance(item, StreamEnd):
                return


class _Group:
    """The batches bound for one actor in one tick, each waiting for its inbox."""

    def __init__(self, actor: Handle, ledger: LedgerRef | None) -> None:
        self.actor = actor
        self.ledger = ledger
        self.specs: list[BatchSpec] = []
        self.ready: dict[str, asyncio.Future[Inbox]] = {}
        self.sent = False


class Submissions:
    """Per executor actor name and event loop, the group of batches gathered in this tick."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, asyncio.AbstractEventLoop], _Group] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.messages = 0
        """Messages that carried batches (a group, or a lone batch)."""

    async def submit(
        self, name: str, actor: Handle, spec: BatchSpec, ledger: LedgerRef | None = None
    ) -> Inbox:
        """Send ``spec`` to ``actor`` with the batches of this tick; its inbox once reserved.

        ``ledger``: the actor keeps this driver's slot there (the batch then goes unreserved,
        with a ticket).

        Raises what the reservation (or sending) raised: nothing of the batch ran then. A
        caller cancelled while it waits takes its batch out, or cancels it once sent.
        """
        loop = asyncio.get_running_loop()  # a group, and its futures, belong to one loop
        key = (name, loop)
        group = self._open.get(key)
        if group is None or group.actor is not actor or len(group.specs) >= MAX_GROUP:
            group = self._open[key] = _Group(actor, ledger)
            loop.call_soon(self._flush, key, group)
        group.specs.append(spec)
        ready = group.ready[spec.batch_id] = loop.create_future()
        ready.add_done_callback(_retrieved)  # its caller may be gone
        try:
            return await asyncio.shield(ready)
        except asyncio.CancelledError as err:
            if not group.sent:
                group.specs.remove(spec)
                del group.ready[spec.batch_id]
            else:
                send(actor, ExecutorActor.cancel, spec.batch_id, repr(err) or "cancelled")
            raise

    def _flush(self, key: tuple[str, asyncio.AbstractEventLoop], group: _Group) -> None:
        if self._open.get(key) is group:
            del self._open[key]
        group.sent = True
        specs = tuple(group.specs)
        if len(specs) > 1:
            try:
                self._send_group(group, specs, group.ready)
                return
            except Exception:  # one batch Ray cannot send, or an executor without run_batches
                _log.debug("toolray: a group of batches went one by one", exc_info=True)
        for spec in specs:
            ready = group.ready[spec.batch_id]
            try:
                self._send_alone(group, spec, ready)
            except Exception as err:  # that batch alone fails, before anything of it ran
                _fail(ready, err)

    def _send_group(
        self, group: _Group, specs: tuple[BatchSpec, ...], ready: dict[str, asyncio.Future[Inbox]]
    ) -> None:
        actor, ledger = group.actor, group.ledger
        data = encode(specs, from_user=True)  # what cannot be encoded fails here, unsent
        tickets = [None if ledger is None else Ticket(ledger, next_ticket()) for _ in specs]
        reserved = None if ledger is not None else self._reserve(actor, specs)
        numbers = tuple(ticket.number for ticket in tickets if ticket is not None)
        chunks = stream(actor, ExecutorActor.run_batches_wire, data, DRIVER, numbers)
        self.messages += 1
        inboxes = {s.batch_id: Inbox(ticket=t) for s, t in zip(specs, tickets, strict=True)}
        self._spawn(_read(chunks, dict(inboxes)))
        waiting = {batch_id: (ready[batch_id], inbox) for batch_id, inbox in inboxes.items()}
        self._hand_over(reserved, actor, specs, waiting)

    def _send_alone(self, group: _Group, spec: BatchSpec, ready: asyncio.Future[Inbox]) -> None:
        actor, ledger = group.actor, group.ledger
        ticket = None if ledger is None else Ticket(ledger, next_ticket())
        number = 0 if ticket is None else ticket.number
        data = stamped(encode(spec, from_user=True), DRIVER, number)  # what cannot go fails here
        reserved = None if ticket is not None else self._reserve(actor, (spec,))
        if len(spec.calls) <= 1 and spec.paced:  # only its end is read: one plain reply
            lone = _single(send(actor, ExecutorActor.run_small_wire, data))
        else:
            lone = stream(actor, ExecutorActor.run_batch_wire, data)
        self.messages += 1
        self._hand_over(reserved, actor, (spec,), {spec.batch_id: (ready, Inbox(lone, ticket))})

    @staticmethod
    def _reserve(actor: Handle, specs: tuple[BatchSpec, ...]) -> ray.ObjectRef[bool]:
        """The older proof, for an actor that keeps no ledger: sent before the batches."""
        return send(actor, ExecutorActor.reserve, *(spec.batch_id for spec in specs))

    def _hand_over(
        self,
        reserved: ray.ObjectRef[bool] | None,
        actor: Handle,
        specs: tuple[BatchSpec, ...],
        waiting: dict[str, tuple[asyncio.Future[Inbox], Inbox]],
    ) -> None:
        """Each batch's inbox to its caller: at once when ticketed, else once reserved."""
        if reserved is not None:
            self._spawn(_reservation(reserved, actor, specs, waiting))
            return
        for future, inbox in waiting.values():
            if not future.done():
                future.set_result(inbox)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


async def _reservation(
    reserved: ray.ObjectRef[bool],
    actor: Handle,
    specs: tuple[BatchSpec, ...],
    waiting: dict[str, tuple[asyncio.Future[Inbox], Inbox]],
) -> None:
    """Each batch gets its inbox once the reservation came back, or the reservation's error."""
    try:
        await reserved
    except BaseException as err:
        if isinstance(err, rex.RayError) and not is_actor_death(err):
            for spec in specs:  # the actor lives: its batches must not run unreserved
                send(actor, ExecutorActor.cancel, spec.batch_id, "the batch's reservation failed")
        for ready, _ in waiting.values():
            _fail(ready, err)
        if isinstance(err, asyncio.CancelledError):
            raise
        return
    for ready, inbox in waiting.values():
        if not ready.done():
            ready.set_result(inbox)


async def _single(ref: ray.ObjectRef[bytes]) -> AsyncIterator[ray.ObjectRef[bytes]]:
    yield ref


def _fail(ready: asyncio.Future[Inbox], err: BaseException) -> None:
    if ready.done():
        return
    if isinstance(err, asyncio.CancelledError):
        ready.cancel()
    else:
        ready.set_exception(err)


def _retrieved(future: asyncio.Future[Inbox]) -> None:
    if not future.cancelled():
        future.exception()


async def _read(chunks: AsyncIterator[ray.ObjectRef[bytes]], inboxes: dict[str, Inbox]) -> None:
    """Route a group's merged chunks to each batch's inbox, then end every open one.

    An inbox leaves ``inboxes`` once its batch ended, so a long batch does not keep its
    finished mates' inboxes.
    """
    end: BaseException | _Ended = _ENDED
    try:
        async for ref in chunks:
            chunk = decode(await ref)
            match chunk:
                case MuxChunk(items):
                    for batch_id, entries in items.items():
                        if (inbox := inboxes.get(batch_id)) is not None:
                            inbox.take(entries)
                            if not inbox.open:
                                del inboxes[batch_id]
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
