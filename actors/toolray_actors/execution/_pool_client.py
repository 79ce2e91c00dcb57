"""The executor's side of a worker pool: least-loaded pick, replacement, definition cache.

Each executor actor keeps, per pool, the current worker list (from the manager), its own
in-flight counts for least-loaded dispatch, and which definitions it has already sent to
which worker. In an elastic pool a call waits here while every member already runs
``max_concurrency`` of this executor's calls, and the manager is asked to grow.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from toolray import AbortError, AbortSignal
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH, OverloadedError
from toolray_actors._placement import Isolation
from toolray_actors._remote import Handle, send

from ._deaths import SentAt

__all__ = ("PoolClient", "WorkerSlot")

_log = logging.getLogger("toolray")


_T = TypeVar("_T")
_U = TypeVar("_U")


@dataclass(eq=False)
class WorkerSlot:
    """One worker as an executor sees it."""

    wid: str
    handle: Handle
    in_flight: int = 0
    sent: set[str] = field(default_factory=set)
    killed: bool = False
    gone: bool = False
    """Retired from this executor's view: killed, dead or drained (its instances are lost)."""


MemberList = tuple[tuple[int, int], list[tuple[str, Handle]]]
"""A pool's members as its manager answers: ``(epoch, version)`` and ``(wid, handle)`` pairs."""


class Members(Protocol):
    """What an executor asks of a pool's manager actor (whose module imports this one)."""

    async def members(self) -> MemberList:
        """The current members."""
        ...

    async def wait_members(self, version: tuple[int, int], timeout_s: float = ...) -> MemberList:
        """The members once they differ from ``version`` (or after ``timeout_s``)."""
        ...

    async def grow(self, waiting: int) -> int:
        """Ask an elastic pool to grow for ``waiting`` calls; the workers added."""
        ...

    async def never_ran(self, wid: str, sent: SentAt) -> bool:
        """Whether a message sent to ``wid`` at ``sent`` that met it gone cannot have run."""
        ...

    async def replace(self, wid: str, killed: bool) -> MemberList:
        """Replace a lost worker; the members after."""
        ...


class PoolClient:
    """The executor's view of one pool: least-loaded pick, replacement, definition cache."""

    def __init__(
        self,
        manager: Handle,
        isolation: Isolation = "call",
        *,
        per_worker: int = 0,
        elastic: bool = False,
        max_queue_ms: float | None = None,
    ) -> None:
        self.manager = manager
        self.isolation: Isolation = isolation
        self.per_worker = per_worker
        self.elastic = elastic
        self.max_queue_s = max_queue_ms / 1000.0 if max_queue_ms is not None else None
        """How long a call may wait for capacity in this pool (``None``: no bound)."""
        self.waiting = 0  # calls waiting for room on a member (elastic pools)
        self._asking: asyncio.Future[None] | None = None
        self._freed = asyncio.Event()
        self.version: tuple[int, int] = (0, 0)
        self.slots: dict[str, WorkerSlot] = {}
        self._poller: asyncio.Future[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.retired: set[str] = set()

    def _update(self, version: tuple[int, int], members: list[tuple[str, Handle]]) -> None:
        epoch, number = version
        version = (int(epoch), int(number))
        if version < self.version:
            return
        self.version = version
        self.slots = {
            wid: self.slots.get(wid) or WorkerSlot(wid, handle)
            for wid, handle in members
            if wid not in self.retired
        }
        # a retired worker the manager no longer lists needs no remembering
        self.retired &= {wid for wid, _ in members}

    async def refresh(self) -> None:
        """Fetch the current members."""
        version, members = await send(self.manager, Members.members)
        self._update(version, members)

    async def _fetch(self) -> None:
        version, members = await send(self.manager, Members.wait_members, self.version)
        self._update(version, members)

    def _poll(self) -> asyncio.Future[None]:
        """The one membership long-poll every waiting call shares."""
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._fetch())
        return self._poller

    async def pick(
        self,
        signal: AbortSignal | None = None,
        on_wait: Callable[[], None] | None = None,
        max_wait_s: float | None = None,
    ) -> WorkerSlot:
        """The started worker with the fewest of this executor's calls in flight.

        With none (the pool is starting, its resources are absent, or every member was
        just retired) — or, in an elastic pool, none with room — the call waits here;
        ``signal`` firing meanwhile raises ``AbortError`` (``ABORTED_BEFORE_DISPATCH``:
        nothing was sent to any worker), and a wait past ``max_wait_s`` raises
        ``OverloadedError``. ``on_wait()`` is told once the call waits for busy members
        (not while the pool has none: a pool that cannot start its workers is not busy).
        """
        delay = 0.01
        until = None if max_wait_s is None else asyncio.get_running_loop().time() + max_wait_s
        while True:
            if signal is not None and signal.aborted:
                raise AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)
            _check_overdue(until, max_wait_s)
            if self.slots:
                slot = min(self.slots.values(), key=lambda s: s.in_flight)
                if not self.elastic or slot.in_flight < self.per_worker:
                    return slot
                if on_wait is not None:  # busy members: the call waits for capacity
                    on_wait()
                    on_wait = None
                await self._wait_for_room(signal, until)  # every member is full: grow the pool
                continue
            poll = self._poll()
            await _wait_or_abort(poll, signal, until)
            if poll.done() and poll.exception() is not None:
                # the manager is restarting (Ray brings it back with fresh workers): wait
                _log.debug("toolray: pool manager unavailable: %r", poll.exception())
                await _wait_or_abort(asyncio.ensure_future(asyncio.sleep(delay)), signal, until)
                delay = min(delay * 2, 0.5)

    async def _wait_for_room(self, signal: AbortSignal | None, until: float | None) -> None:
        """Ask the manager for workers, then wait for a freed slot or new members."""
        self.waiting += 1
        try:
            if self._asking is None or self._asking.done():
                self._asking = asyncio.ensure_future(self._ask_grow())
            self._freed.clear()
            freed = asyncio.ensure_future(self._freed.wait())
            try:
                await _wait_or_abort(_first(freed, self._poll()), signal, until)
            finally:
                freed.cancel()
        finally:
            self.waiting -= 1

    async def _ask_grow(self) -> None:
        try:
            await send(self.manager, Members.grow, self.waiting)
        except Exception:  # the manager is restarting: the next wait asks again
            _log.debug("toolray: the pool manager could not grow", exc_info=True)

    def forget_code(self, key: str) -> None:
        """Definition ``key`` went from the registry: no slot needs to remember sending it."""
        for slot in self.slots.values():
            slot.sent.discard(key)

    def released(self, slot: WorkerSlot) -> None:
        """``slot`` finished one of this executor's calls (a waiting call may go now)."""
        if self.elastic:
            self._freed.set()

    async def never_ran(self, slot: WorkerSlot, sent: SentAt) -> bool:
        """Whether a message sent at ``sent`` that met ``slot``'s worker gone never ran.

        Its pool retired the worker, or knew it dead before the message left (then this
        view was stale: the current members are fetched).
        """
        try:
            never = bool(await send(self.manager, Members.never_ran, slot.wid, sent))
        except Exception:  # the manager is restarting: the call may have run
            return False
        if never:
            self.retire(slot, killed=False)
            with contextlib.suppress(Exception):
                await self.refresh()
        return never

    async def replace(self, slot: WorkerSlot, *, killed: bool) -> None:
        """Retire ``slot``'s worker (we killed it, or it died) and adopt the new members."""
        self.retire(slot, killed=killed)
        await self._renew(slot.wid, killed)

    async def _renew(self, wid: str, killed: bool) -> None:
        try:
            version, members = await send(self.manager, Members.replace, wid, killed)
        except Exception:  # the manager itself died: its restart brings a fresh pool
            _log.debug("toolray: the pool manager could not replace %s", wid, exc_info=True)
            self.slots = {}  # its workers died with it: the next pick waits for the new ones
            return
        self._update(version, members)

    def retire(self, slot: WorkerSlot, *, killed: bool) -> None:
        """Stop picking ``slot`` at once (the replacement arrives later)."""
        slot.killed = slot.killed or killed
        slot.gone = True
        self.slots.pop(slot.wid, None)
        self.retired.add(slot.wid)

    def replace_soon(self, slot: WorkerSlot, *, killed: bool) -> None:
        """Retire now; the manager replaces in the background (the result does not wait)."""
        self.retire(slot, killed=killed)
        task = asyncio.ensure_future(self._replace_quietly(slot, killed))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _replace_quietly(self, slot: WorkerSlot, killed: bool) -> None:
        await self._renew(slot.wid, killed)


def _first(one: asyncio.Future[_T], other: asyncio.Future[_U]) -> asyncio.Future[None]:
    """A future done when the first of ``one`` and ``other`` is (both keep running)."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def settle(_: object) -> None:
        if not done.done():
            done.set_result(None)

    one.add_done_callback(settle)
    other.add_done_callback(settle)
    return done


def _check_overdue(until: float | None, max_wait_s: float | None) -> None:
    """``OverloadedError`` once a call waited ``max_wait_s`` for capacity."""
    if until is not None and asyncio.get_running_loop().time() >= until:
        raise OverloadedError(
            f"no capacity in the pool within its max_queue_ms ({(max_wait_s or 0) * 1000:g}ms"
            " left for this call); it never ran"
        )


async def _wait_or_abort(
    poll: asyncio.Future[None], signal: AbortSignal | None, until: float | None = None
) -> None:
    """Wait for ``poll`` or ``signal``, whichever comes first (``poll`` keeps running).

    ``until``: a loop time the wait never goes past.
    """
    timeout = None if until is None else max(0.0, until - asyncio.get_running_loop().time())
    if signal is None:
        await asyncio.wait({poll}, timeout=timeout)
        return
    loop = asyncio.get_running_loop()
    wake: asyncio.Future[None] = loop.create_future()

    def fire() -> None:
        if not wake.done():
            wake.set_result(None)

    remove = signal.add_listener(lambda: loop.call_soon_threadsafe(fire))
    try:
        await asyncio.wait({poll, wake}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        wake.cancel()
