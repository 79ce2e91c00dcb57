"""Worker pools: the manager actor (one per placement) and the executor-side client.

The manager owns the worker actors of one placement and one warm spare. Replacing a
worker (killed by us, or found dead) promotes the spare at once — milliseconds instead of
the 0.5–2 s of starting an actor — and starts the next spare in the background. The client
(in each executor actor) keeps the current worker list, its own in-flight counts for
least-loaded dispatch, and which definitions it has already sent to which worker.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from toolray import AbortError, AbortSignal

from ._handles import create_worker, kill
from ._stats import ActorStats, actor_stats

__all__ = ("PoolClient", "PoolManager", "PoolStats", "WorkerSlot")

_log = logging.getLogger("toolray")


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolStats:
    """A snapshot of one pool."""

    workers: int
    spares: int
    kills: int
    deaths: int
    replacements: int
    version: int


_HEALTH_TIMEOUT_S = 2.0


def _as_future(ref: Any) -> Any:
    return asyncio.wrap_future(ref.future())


class PoolManager:
    """Creates, replaces and kills the workers of one placement."""

    def __init__(self, size: int, spare: int, options: dict[str, Any], threads: int) -> None:
        self._options = options
        self._threads = threads
        self._ids = itertools.count(1)
        # A restarted manager is a new incarnation: its worker ids and versions must never
        # collide with those its clients remember from the previous one.
        self._epoch = time.time_ns()
        self.workers: dict[str, Any] = {}
        self.spares: list[tuple[str, Any]] = []
        self.version = 1
        self.kills = self.deaths = self.replacements = 0
        self._spare_target = spare
        self._size = size
        self._background: set[asyncio.Task[Any]] = set()
        for _ in range(size):
            wid, handle = self._new_worker()
            self.workers[wid] = handle
        for _ in range(spare):
            self.spares.append(self._new_worker())

    def _new_worker(self) -> tuple[str, Any]:
        wid = f"w{next(self._ids)}.{self._epoch % 10**6:06d}"
        return wid, create_worker(self._options, self._threads)

    async def ready(self) -> int:
        """Wait until every worker and spare answers; returns the worker count."""
        handles = [*self.workers.values(), *(h for _, h in self.spares)]
        await asyncio.gather(*(h.health.remote() for h in handles))
        return len(self.workers)

    async def members(self) -> tuple[tuple[int, int], list[tuple[str, Any]]]:
        """``(version, [(worker id, handle), …])``."""
        return (self._epoch, self.version), list(self.workers.items())

    async def replace(
        self, wid: str, killed: bool
    ) -> tuple[tuple[int, int], list[tuple[str, Any]]]:
        """Retire ``wid`` (killing it if ``killed``) and promote a spare; idempotent.

        A worker that died on its own may have taken its node with it: then every member
        and spare is checked, and the dead ones are replaced too.
        """
        handle = self.workers.pop(wid, None)
        if handle is None:
            return (self._epoch, self.version), list(self.workers.items())
        kill(handle)
        if killed:
            self.kills += 1
        else:
            self.deaths += 1
            await self._drop_dead()
        await self._fill(len(self.workers) + 1)
        return (self._epoch, self.version), list(self.workers.items())

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
        self.version += 1
        self._refill_spares()

    def _refill_spares(self) -> None:
        while len(self.spares) < self._spare_target:
            wid, handle = self._new_worker()
            self.spares.append((wid, handle))
            task = asyncio.ensure_future(self._warm(handle))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _warm(self, handle: Any) -> None:
        try:
            await handle.health.remote()
        except Exception:  # typically the namespace shutting down: nothing to tell a user
            _log.debug("toolray: a spare worker failed to start", exc_info=True)

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

    async def stats(self) -> PoolStats:
        """Counters for ``RayRuntime.stats()``."""
        return PoolStats(
            workers=len(self.workers),
            spares=len(self.spares),
            kills=self.kills,
            deaths=self.deaths,
            replacements=self.replacements,
            version=self.version,
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

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.version: tuple[int, int] = (0, 0)
        self.slots: dict[str, WorkerSlot] = {}
        self._lock = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()
        self.retired: set[str] = set()

    def _update(self, version: tuple[int, int], members: list[tuple[str, Any]]) -> None:
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

    async def pick(self, signal: AbortSignal | None = None) -> WorkerSlot:
        """The live worker with the fewest of this executor's calls in flight.

        While the pool has no member to offer (every member retired, or the manager itself
        restarting after a crash) it waits, backing off, until one arrives or ``signal``
        aborts (then it raises ``AbortError``: the call never reached a worker).
        """
        delay = 0.01
        while not self.slots:
            if signal is not None and signal.aborted:
                err = AbortError("tool call aborted")
                err.reason = "no worker became available before the call was aborted"
                raise err
            async with self._lock:
                if not self.slots:
                    try:
                        await self.refresh()
                    except Exception:  # the manager is restarting: Ray brings it back
                        _log.debug("toolray: pool manager unavailable", exc_info=True)
            if not self.slots:
                await asyncio.sleep(delay)
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
