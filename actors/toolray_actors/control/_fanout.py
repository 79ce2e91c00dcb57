"""Registry → executors: every change reaches every attached executor before a write returns.

Writes are group-committed: a write takes its sequence number and queues its change
(:meth:`Fanout.publish`, synchronous, under the registry's write lock), then waits for
:meth:`Fanout.wait` outside the lock. One flusher sends everything queued as one message per
executor (``apply_changes(first_seq, deltas)``), waits until each applied it or is known
dead, then resolves every write of that group. So with many executors and many concurrent
writes (a farm's agents creating their scopes at once) the messages grow with the number
of executors per group, not per write; changes still reach each executor in sequence order.

There is no give-up timeout: a write waits until each executor has applied the change or
is known dead (Ray fails the call of a dead actor), because "a call that starts after a
write returns sees it" is the consistency the registry promises. A slow
executor is logged at debug level every ``_SLOW_S`` while the write waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol, TypeVar

from toolray_actors._errors import is_actor_death
from toolray_actors._remote import Handle, send
from toolray_actors._wire import RegistryChange

if TYPE_CHECKING:
    import ray

_T = TypeVar("_T")

__all__ = ("Fanout",)

_log = logging.getLogger("toolray")

_SLOW_S = 30.0

_MAX_GROUP = 256
"""Changes per message at most (a longer queue goes out in several groups, in order)."""


def _as_future(ref: ray.ObjectRef[_T]) -> asyncio.Future[_T]:
    return asyncio.wrap_future(ref.future())


class ChangeSink(Protocol):
    """What the fan-out asks of an executor actor (its class imports this module)."""

    async def apply_changes(self, first: int, deltas: tuple[RegistryChange, ...]) -> int:
        """Apply changes ``first, first + 1, …``; the sequence applied."""
        ...


class Fanout:
    """The attached executors, the change sequence and the queue of unsent changes."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.seq = 0
        self.executors: dict[str, Handle] = {}
        self.messages = 0
        """``apply_changes`` messages sent (one per executor per group)."""
        self._queue: list[tuple[int, RegistryChange]] = []
        self._done: dict[int, asyncio.Future[None]] = {}
        self._flusher: asyncio.Task[None] | None = None

    def publish(self, delta: RegistryChange) -> int:
        """Take the next sequence number for ``delta`` and queue it; returns the number.

        Synchronous: call it where the change is made (under the write lock), then await
        :meth:`wait` once the lock is released.
        """
        self.seq += 1
        self._queue.append((self.seq, delta))
        self._done[self.seq] = asyncio.get_running_loop().create_future()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.ensure_future(self._flush())
        return self.seq

    async def wait(self, seq: int) -> None:
        """Return once change ``seq`` reached every executor (or the executor died)."""
        fut = self._done.get(seq)
        if fut is not None:
            await asyncio.shield(fut)

    async def _flush(self) -> None:
        while self._queue:
            group, self._queue = self._queue[:_MAX_GROUP], self._queue[_MAX_GROUP:]
            first = min(seq for seq, _ in group)
            try:
                await self._send(first, tuple(delta for _, delta in group))
            except Exception:  # an executor that cannot be reached resyncs on its next gap
                _log.debug("toolray: change fan-out failed", exc_info=True)
            finally:
                for seq, _ in group:
                    fut = self._done.pop(seq, None)
                    if fut is not None and not fut.done():
                        fut.set_result(None)

    async def _send(self, first: int, deltas: tuple[RegistryChange, ...]) -> None:
        names = list(self.executors)
        last = first + len(deltas) - 1
        futures = [
            _as_future(send(self.executors[n], ChangeSink.apply_changes, first, deltas))
            for n in names
        ]
        self.messages += len(futures)
        pending = set(futures)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=_SLOW_S)
            if pending:
                _log.debug("toolray: %d executor(s) slow to apply change %d", len(pending), last)
        for name, fut in zip(names, futures, strict=True):
            err = fut.exception()
            if err is None:
                continue
            if is_actor_death(err):
                self.executors.pop(name, None)
            else:  # it resyncs on the next sequence gap
                _log.debug("toolray: executor %s missed change %d: %r", name, last, err)
