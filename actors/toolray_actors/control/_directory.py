"""Actors known ready, shared by the handles of one runtime (one start per name at a time).

In sharded mode hundreds of scope handles map onto a few executor actors. When they all
make their first call at once, only the first one per name looks the actor up (or creates
it) and waits for ``ready``; the others await that same start. A handle that finds the
actor dead drops it, and the next call starts it again. Plain threading + asyncio (handles
may run on the caller's loop or the runtime's portal loop), no Ray.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ("ActorDirectory",)

_H = TypeVar("_H")


class ActorDirectory(Generic[_H]):
    """Ready actors by name; a name being started holds the future of its start."""

    def __init__(self) -> None:
        self._entries: dict[str, _H | concurrent.futures.Future[_H]] = {}
        self._lock = threading.Lock()

    async def get(self, name: str, start: Callable[[], Awaitable[_H]]) -> _H:
        """The ready actor ``name``; ``start()`` runs once for concurrent first callers."""
        while True:
            mine: concurrent.futures.Future[_H] | None = None
            with self._lock:
                entry = self._entries.get(name)
                if entry is None:
                    mine = concurrent.futures.Future()
                    entry = self._entries[name] = mine
            if mine is not None:
                return await self._start(name, mine, start)
            if not isinstance(entry, concurrent.futures.Future):
                return entry
            try:  # shielded: a waiter's own cancellation must not cancel the shared start
                return await asyncio.shield(asyncio.wrap_future(entry))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if entry.cancelled() and (task is None or not task.cancelling()):
                    continue  # the starter was cancelled, not us: start it ourselves
                raise

    async def _start(
        self, name: str, entry: concurrent.futures.Future[_H], start: Callable[[], Awaitable[_H]]
    ) -> _H:
        try:
            actor = await start()
        except BaseException as err:
            with self._lock:
                if self._entries.get(name) is entry:
                    del self._entries[name]
            if isinstance(err, asyncio.CancelledError):
                entry.cancel()
            else:
                entry.set_exception(err)
            raise
        with self._lock:
            if self._entries.get(name) is entry:
                self._entries[name] = actor
        entry.set_result(actor)
        return actor

    def drop(self, name: str, actor: _H) -> None:
        """Forget ``actor`` (found dead) unless another start already replaced it."""
        with self._lock:
            if self._entries.get(name) is actor:
                del self._entries[name]
