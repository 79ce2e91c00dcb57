"""Worker pools: the manager actor (one per placement) and the executor-side client.

The manager owns the worker actors of one placement and one warm spare. Replacing a
worker (killed by us, or found dead) promotes the spare at once — milliseconds instead of
the 0.5–2 s of starting an actor — and starts the next spare in the background. With
``isolation="call"`` a worker is a member once its call processes are warm too, and the
manager's statistics sum its workers' call-process counters. The client (in each executor
actor) keeps the current worker list, its own in-flight counts for least-loaded dispatch,
and which definitions it has already sent to which worker.

Only workers that have answered once are members: a pool whose workers cannot be scheduled
yet (its resources are absent) has none, and its calls wait in the executor — each one
abortable, so a call still waiting at its deadline times out like any other, and nothing
queued inside Ray runs later. The executor learns of new members by long-polling the
manager (:meth:`PoolManager.wait_members`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from toolray import AbortError, AbortSignal

from ._handles import create_worker, kill, resources_offered
from ._placement import Isolation, WorkerSettings
from ._stats import ActorStats, ChildStats, PoolStats, actor_stats

__all__ = ("PoolClient", "PoolManager", "PoolStats", "WorkerSlot")

_log = logging.getLogger("toolray")


_HEALTH_TIMEOUT_S = 2.0
_READY_BOUND_S = 60.0
"""How long ``ready()`` waits for a pool whose resources the cluster offers."""
_MEMBERS_POLL_S = 10.0


def _as_future(ref: Any) -> Any:
    return asyncio.wrap_future(ref.future())


class PoolManager:
    """Creates, replaces and kills the workers of one placement."""

    def __init__(
        self, size: int, spare: int, options: dict[str, Any], settings: WorkerSettings
    ) -> None:
        self._options = options
        self._settings = settings
        self._children: dict[str, ChildStats] = {}  # last seen, per worker (dead ones too)
        self._ids = itertools.count(1)
        # A restarted manager is a new incarnation: its worker ids and versions must never
        # collide with those its clients remember from the previous one (chaos campaign).
        self._epoch = time.time_ns()
        self.workers: dict[str, Any] = {}
        self.spares: list[tuple[str, Any]] = []
        self.version = 1
        self.kills = self.deaths = self.replacements = 0
        self._spare_target = spare
        self._size = size
        self._background: set[asyncio.Task[Any]] = set()
        self.started: set[str] = set()  # workers that answered once (only they are members)
        self._watched: set[str] = set()
        self._changed: asyncio.Event | None = None
        for _ in range(size):
            wid, handle = self._new_worker()
            self.workers[wid] = handle
        for _ in range(spare):
            self.spares.append(self._new_worker())

    def _new_worker(self) -> tuple[str, Any]:
        wid = f"w{next(self._ids)}.{self._epoch % 10**6:06d}"
        return wid, create_worker(self._options, self._settings)

    # ------------------------------------------------------------------ membership
    def _watch(self) -> None:
        """Learn when each worker and spare starts (a member only once it answered)."""
        for wid, handle in [*self.workers.items(), *self.spares]:
            if wid not in self._watched:
                self._watched.add(wid)
                self._spawn(self._await_start(wid, handle))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _await_start(self, wid: str, handle: Any) -> None:
        try:
            await handle.health.remote()
            await handle.warm_up.remote()
        except Exception:  # typically the namespace shutting down: nothing to tell a user
            _log.debug("toolray: worker %s failed to start", wid, exc_info=True)
            return
        self._started(wid)

    def _started(self, wid: str) -> None:
        if wid in self.started:
            return
        self.started.add(wid)
        if wid in self.workers:
            self._bump()

    def _bump(self) -> None:
        self.version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _members(self) -> tuple[tuple[int, int], list[tuple[str, Any]]]:
        started = [(w, h) for w, h in self.workers.items() if w in self.started]
        return (self._epoch, self.version), started

    async def ready(self) -> int:
        """Wait (bounded) until every worker and spare answers; returns the member count.

        A pool whose resources no node of the cluster offers returns at once: its calls
        wait for members (or their deadline) in the executor, never ``ready()``.
        """
        self._watch()
        if await asyncio.to_thread(resources_offered, self._options):
            pending = [_started(h) for h in [*self.workers.values()]]
            pending += [_started(h) for _, h in self.spares]
            try:
                await asyncio.wait_for(asyncio.gather(*pending), _READY_BOUND_S)
            except TimeoutError:
                pass  # the watchers add each worker as it starts
            else:
                for wid in [*self.workers, *(w for w, _ in self.spares)]:
                    self._started(wid)
        return len(self._members()[1])

    async def members(self) -> tuple[tuple[int, int], list[tuple[str, Any]]]:
        """``(version, [(worker id, handle), …])`` of the started workers."""
        self._watch()
        return self._members()

    async def wait_members(
        self, version: tuple[int, int], timeout_s: float = _MEMBERS_POLL_S
    ) -> tuple[tuple[int, int], list[tuple[str, Any]]]:
        """:meth:`members`, once the version differs from ``version`` (or after a bound)."""
        self._watch()
        if (self._epoch, self.version) == tuple(version):
            if self._changed is None:
                self._changed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(timeout_s, _MEMBERS_POLL_S))
        return self._members()

    async def replace(
        self, wid: str, killed: bool
    ) -> tuple[tuple[int, int], list[tuple[str, Any]]]:
        """Retire ``wid`` (killing it if ``killed``) and promote a spare; idempotent.

        A worker that died on its own may have taken its node with it: then every member
        and spare is checked, and the dead ones are replaced too.
        """
        handle = self.workers.pop(wid, None)
        if handle is None:
            return self._members()
        self._forget(wid)
        kill(handle)
        if killed:
            self.kills += 1
        else:
            self.deaths += 1
            await self._drop_dead()
        await self._fill(len(self.workers) + 1)
        return self._members()

    async def _alive(self, handle: Any) -> bool:
        try:
            await asyncio.wait_for(_as_future(handle.health.remote()), _HEALTH_TIMEOUT_S)
        except Exception:
            return False
        return True

    async def _drop_dead(self) -> None:
        members = list(self.workers.items())
        alive = await asyncio.gather(*(self._alive(h) for _, h in members))
        for (wid, handle), ok in zip(members, alive, strict=True):
            if not ok:
                self.workers.pop(wid, None)
                self._forget(wid)
                kill(handle)
                self.deaths += 1
        spares_alive = await asyncio.gather(*(self._alive(h) for _, h in self.spares))
        self.spares = [s for s, ok in zip(self.spares, spares_alive, strict=True) if ok]

    async def _fill(self, size: int) -> None:
        """Bring the pool back to ``size`` members: spares first (warm), then new ones."""
        while len(self.workers) < max(size, self._size):
            if self.spares:
                new_id, new_handle = self.spares.pop(0)
            else:
                new_id, new_handle = self._new_worker()
            self.workers[new_id] = new_handle
            self.replacements += 1
        self._bump()
        self._refill_spares()
        self._watch()

    def _refill_spares(self) -> None:
        while len(self.spares) < self._spare_target:
            self.spares.append(self._new_worker())
        self._watch()  # a spare starts warming now

    def _forget(self, wid: str) -> None:
        self.started.discard(wid)
        self._watched.discard(wid)

    async def actor_stats(self, name: str) -> list[ActorStats]:
        """This manager's record, then one per live worker and spare."""
        own = actor_stats("pool", name, 0)
        handles = [*self.workers.values(), *(h for _, h in self.spares)]
        found = await asyncio.gather(
            *(
                asyncio.wait_for(_as_future(h.actor_stats.remote()), _HEALTH_TIMEOUT_S)
                for h in handles
            ),
            return_exceptions=True,
        )
        return [own, *(s for s in found if isinstance(s, ActorStats))]

    async def stats(self, name: str = "") -> PoolStats:
        """Counters for ``RayRuntime.stats()`` (``workers``: started members only)."""
        live = list(self.workers.items())
        found = await asyncio.gather(
            *(asyncio.wait_for(_as_future(h.status.remote()), _HEALTH_TIMEOUT_S) for _, h in live),
            return_exceptions=True,
        )
        for (wid, _), status in zip(live, found, strict=True):
            if not isinstance(status, BaseException):
                self._children[wid] = status.children
        seen = self._children.values()
        now = [self._children[w] for w, _ in live if w in self._children]
        return PoolStats(
            name=name,
            isolation=self._settings.isolation,
            workers=len(self._members()[1]),
            spares=len(self.spares),
            kills=self.kills,
            deaths=self.deaths,
            replacements=self.replacements,
            version=self.version,
            child_kills=sum(c.kills for c in seen),
            child_deaths=sum(c.deaths for c in seen),
            child_replacements=sum(c.replacements for c in seen),
            children=sum(c.live for c in now),
            children_busy=sum(c.live - c.idle for c in now),
            child_pids=tuple(pid for c in now for pid in c.pids),
        )

    async def shutdown(self) -> None:
        """Kill every worker and spare."""
        for handle in [*self.workers.values(), *(h for _, h in self.spares)]:
            kill(handle)
        self.workers.clear()
        self.spares.clear()


@dataclass(eq=False)
class WorkerSlot:
    """One worker as an executor sees it."""

    wid: str
    handle: Any
    in_flight: int = 0
    sent: set[str] = field(default_factory=set)
    killed: bool = False


class PoolClient:
    """The executor's view of one pool: least-loaded pick, replacement, definition cache."""

    def __init__(self, manager: Any, isolation: Isolation = "call") -> None:
        self.manager = manager
        self.isolation: Isolation = isolation
        self.version: tuple[int, int] = (0, 0)
        self.slots: dict[str, WorkerSlot] = {}
        self._poller: asyncio.Future[None] | None = None
        self._background: set[asyncio.Task[None]] = set()
        self.retired: set[str] = set()

    def _update(self, version: tuple[int, int], members: list[tuple[str, Any]]) -> None:
        version = (int(version[0]), int(version[1]))
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
        version, members = await self.manager.members.remote()
        self._update(version, members)

    async def _fetch(self) -> None:
        version, members = await self.manager.wait_members.remote(self.version)
        self._update(version, members)

    def _poll(self) -> asyncio.Future[None]:
        """The one membership long-poll every waiting call shares."""
        if self._poller is None or self._poller.done():
            self._poller = asyncio.ensure_future(self._fetch())
        return self._poller

    async def pick(self, signal: AbortSignal | None = None) -> WorkerSlot:
        """The started worker with the fewest of this executor's calls in flight.

        With none (the pool is starting, its resources are absent, or every member was
        just retired), the call waits here for members; ``signal`` firing meanwhile raises
        ``AbortError`` (nothing was sent to any worker).
        """
        delay = 0.01
        while not self.slots:
            if signal is not None and signal.aborted:
                raise AbortError("tool call aborted")
            poll = self._poll()
            await _wait_or_abort(poll, signal)
            if poll.done() and poll.exception() is not None:
                # the manager is restarting (Ray brings it back with fresh workers): wait
                _log.debug("toolray: pool manager unavailable: %r", poll.exception())
                await _wait_or_abort(asyncio.ensure_future(asyncio.sleep(delay)), signal)
                delay = min(delay * 2, 0.5)
        return min(self.slots.values(), key=lambda s: s.in_flight)

    async def replace(self, slot: WorkerSlot, *, killed: bool) -> None:
        """Retire ``slot``'s worker (we killed it, or it died) and adopt the new members."""
        self.retire(slot, killed=killed)
        await self._renew(slot.wid, killed)

    async def _renew(self, wid: str, killed: bool) -> None:
        try:
            version, members = await self.manager.replace.remote(wid, killed)
        except Exception:  # the manager itself died: its restart brings a fresh pool
            _log.debug("toolray: the pool manager could not replace %s", wid, exc_info=True)
            self.slots = {}  # its workers died with it: the next pick waits for the new ones
            return
        self._update(version, members)

    def retire(self, slot: WorkerSlot, *, killed: bool) -> None:
        """Stop picking ``slot`` at once (the replacement arrives later)."""
        slot.killed = slot.killed or killed
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


async def _started(handle: Any) -> None:
    """A worker answers, and its call processes (``"call"``) are warm."""
    await handle.health.remote()
    await handle.warm_up.remote()


async def _wait_or_abort(poll: asyncio.Future[None], signal: AbortSignal | None) -> None:
    """Wait for ``poll`` or ``signal``, whichever comes first (``poll`` keeps running)."""
    if signal is None:
        await asyncio.wait({poll})
        return
    loop = asyncio.get_running_loop()
    wake: asyncio.Future[None] = loop.create_future()

    def fire() -> None:
        if not wake.done():
            wake.set_result(None)

    remove = signal.add_listener(lambda: loop.call_soon_threadsafe(fire))
    try:
        await asyncio.wait({poll, wake}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        remove()
        wake.cancel()
