"""An instance's turns: exclusive calls one at a time, in arrival order, from any loop.

A :class:`Turnstile` is a first-come-first-served reader/writer gate. An exclusive entry
(a call that is not concurrency-safe, ``snapshot``, ``run``, ``fork``, ``close``) waits
until nothing else holds the instance; shared entries (concurrency-safe calls) overlap
one another but never an exclusive one, and never overtake an exclusive entry that
arrived before them. Entries come from any thread and any event loop (an in-process
registry serves several): the state is guarded by a lock and each waiter is woken on its
own loop.

A nested call runs inside its caller's turn: an entry whose parent token holds (or runs
inside) the instance's turn passes at once, and its own token counts as inside while it
runs, so a call it nests in turn passes too — no deadlock.

Work done in a turn on a call's behalf (opening or restoring its instance) can outlast the
call's patience: :func:`unless_aborted` gives the call ``AbortError`` as soon as its signal
fires (its deadline, its abort) and lets the work finish alone, leaving the turn when it
ends — so a later call never enters while an open is still under way.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar, final

from toolray._signals import AbortSignal
from toolray.errors import AbortError

__all__ = ("Turn", "Turnstile", "unless_aborted")

_T = TypeVar("_T")


@dataclass(eq=False, slots=True)
class _Waiter:
    exclusive: bool
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False


@final
@dataclass(eq=False, slots=True)
class Turn:
    """One entry's hold on an instance; :meth:`Turnstile.leave` gives it back (once)."""

    exclusive: bool
    token: Any
    nested: bool = False
    left: bool = field(default=False, repr=False)


class Turnstile:
    """The turns of one instance."""

    __slots__ = ("_holders", "_lock", "_queue", "_readers", "_writer")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers = 0
        self._writer = False
        self._queue: deque[_Waiter] = deque()
        self._holders: dict[Any, int] = {}

    @property
    def busy(self) -> bool:
        """Whether anything holds the instance or waits for it."""
        with self._lock:
            return self._writer or self._readers > 0 or bool(self._queue)

    def try_enter(self, token: Any = None) -> Turn | None:
        """An exclusive turn now, or ``None`` if anything holds the instance or waits."""
        with self._lock:
            if self._writer or self._readers or self._queue:
                return None
            self._writer = True
            self._hold(token)
        return Turn(exclusive=True, token=token)

    async def enter(
        self,
        *,
        exclusive: bool,
        signal: AbortSignal | None = None,
        token: Any = None,
        parent: Any = None,
    ) -> Turn:
        """Wait for a turn (``AbortError`` ``ABORTED_BEFORE_DISPATCH`` if aborted meanwhile)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if parent is not None and parent in self._holders:
                self._hold(token)
                return Turn(exclusive=exclusive, token=token, nested=True)
            waiter = _Waiter(exclusive, loop, loop.create_future())
            self._queue.append(waiter)
            self._grant()
            if waiter.granted:
                self._hold(token)
                return Turn(exclusive=exclusive, token=token)
        remove = None
        if signal is not None:
            remove = signal.add_listener(lambda: loop.call_soon_threadsafe(_wake, waiter.future))
        try:
            await waiter.future
        except asyncio.CancelledError:
            self._withdraw(waiter)
            raise
        finally:
            if remove is not None:
                remove()
        with self._lock:
            granted = waiter.granted
            if not granted:
                self._queue.remove(waiter)
                self._grant()
            else:
                self._hold(token)
        if not granted:
            raise AbortError("tool call aborted", "ABORTED_BEFORE_DISPATCH")
        return Turn(exclusive=exclusive, token=token)

    def leave(self, turn: Turn) -> None:
        """Give ``turn`` back; the next waiters that can go are woken."""
        with self._lock:
            if turn.left:
                return
            turn.left = True
            self._unhold(turn.token)
            if turn.nested:
                return
            if turn.exclusive:
                self._writer = False
            else:
                self._readers -= 1
            self._grant()

    def _withdraw(self, waiter: _Waiter) -> None:
        """The waiting task was cancelled: leave the queue, or give back a grant."""
        with self._lock:
            if not waiter.granted:
                self._queue.remove(waiter)
            elif waiter.exclusive:
                self._writer = False
            else:
                self._readers -= 1
            self._grant()

    def _hold(self, token: Any) -> None:  # the lock is held
        if token is not None:
            self._holders[token] = self._holders.get(token, 0) + 1

    def _unhold(self, token: Any) -> None:  # the lock is held
        if token is None:
            return
        left = self._holders.get(token, 0) - 1
        if left > 0:
            self._holders[token] = left
        else:
            self._holders.pop(token, None)

    def _grant(self) -> None:  # the lock is held
        while self._queue:
            head = self._queue[0]
            if head.exclusive:
                if self._writer or self._readers:
                    return
                self._writer = True
            else:
                if self._writer:
                    return
                self._readers += 1
            self._queue.popleft()
            try:
                head.loop.call_soon_threadsafe(_wake, head.future)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                if head.exclusive:
                    self._writer = False
                else:
                    self._readers -= 1
                continue
            head.granted = True
            if head.exclusive:
                return


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def unless_aborted(
    work: Coroutine[Any, Any, _T],
    signal: AbortSignal | None,
    leave: Callable[[], None],
    *,
    keep: bool = False,
) -> _T:
    """``work``'s result, done inside the turn that ``leave`` gives back.

    The turn is left once ``work`` ends (on success only if ``keep`` is false: the caller
    then holds it on). If ``signal`` fires first, ``AbortError`` (``ABORTED_BEFORE_DISPATCH``)
    is raised at once and ``work`` goes on alone, leaving the turn when it ends; if the
    caller is cancelled, ``work`` is cancelled too and leaves the turn likewise.
    """
    task = asyncio.ensure_future(work)
    try:
        await (_first_of(task, signal) if signal is not None else asyncio.wait({task}))
    except asyncio.CancelledError:
        task.cancel()
        task.add_done_callback(functools.partial(_ended_alone, leave))
        raise
    if not task.done():  # aborted first: the work goes on alone
        task.add_done_callback(functools.partial(_ended_alone, leave))
        raise AbortError("tool call aborted", "ABORTED_BEFORE_DISPATCH")
    try:
        result = task.result()
    except BaseException:
        leave()
        raise
    if not keep:
        leave()
    return result


async def _first_of(task: asyncio.Future[Any], signal: AbortSignal) -> None:
    loop = asyncio.get_running_loop()
    fired: asyncio.Future[None] = loop.create_future()
    remove = signal.add_listener(lambda: loop.call_soon_threadsafe(_wake, fired))
    try:
        await asyncio.wait({task, fired}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        fired.cancel()


def _ended_alone(leave: Callable[[], None], task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: its caller is gone (a failed open says so itself)
    leave()
