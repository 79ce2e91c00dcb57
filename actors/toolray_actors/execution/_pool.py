"""Worker pools: the manager actor (one per placement; its client is ``_pool_client``).

The manager owns the worker actors of one placement and one warm spare. Replacing a
worker (killed by us, or found dead) promotes the spare at once — milliseconds instead of
the 0.5–2 s of starting an actor — and starts the next spare in the background. With
``isolation="call"`` a worker is a member once its call processes are warm too, and the
manager's statistics sum its workers' call-process counters. An elastic pool
(``max_size > min_size``) also grows and shrinks (``_elastic``).

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
from collections.abc import Coroutine
from typing import TYPE_CHECKING, TypeVar

from toolray_actors._collector import pace_collector
from toolray_actors._errors import is_dead_actor
from toolray_actors._handles import create_pool, create_worker, kill, resources_offered
from toolray_actors._placement import PoolPlan, WorkerSettings
from toolray_actors._remote import Handle, node_id, send
from toolray_actors._stats import ActorStats, ChildStats, PoolStats, actor_stats

from ._deaths import DeathBook, SentAt
from ._elastic import ElasticPolicy, Resizer
from ._metrics import PoolMetrics
from ._pool_client import PoolClient as PoolClient
from ._pool_client import WorkerSlot as WorkerSlot
from ._worker import ToolWorker

if TYPE_CHECKING:
    import ray

__all__ = ("PoolClient", "PoolManager", "PoolStats", "WorkerSlot", "start_pool")

_T = TypeVar("_T")

_log = logging.getLogger("toolray")


_HEALTH_TIMEOUT_S = 2.0
_READY_BOUND_S = 60.0
"""How long ``ready()`` waits for a pool whose resources the cluster offers."""
_MEMBERS_POLL_S = 10.0


def _as_future(ref: ray.ObjectRef[_T]) -> asyncio.Future[_T]:
    return asyncio.wrap_future(ref.future())


class PoolManager:
    """Creates, replaces and kills the workers of one placement."""

    def __init__(
        self,
        size: int,
        spare: int,
        options: dict[str, object],
        settings: WorkerSettings,
        elastic: ElasticPolicy | None = None,
    ) -> None:
        pace_collector()
        self._options = options
        self._settings = settings
        self._children: dict[str, ChildStats] = {}  # last seen, per worker (dead ones too)
        self._ids = itertools.count(1)
        # A restarted manager is a new incarnation: its worker ids and versions must never
        # collide with those its clients remember from the previous one (chaos campaign).
        self._epoch = time.time_ns()
        self.workers: dict[str, Handle] = {}
        self.spares: list[tuple[str, Handle]] = []
        self.version = 1
        self.kills = self.deaths = self.replacements = 0
        self._spare_target = spare
        self._size = size
        self._background: set[asyncio.Task[None]] = set()
        self.started: set[str] = set()  # workers that answered once (only they are members)
        self._watched: set[str] = set()
        self._changed: asyncio.Event | None = None
        self._metrics = PoolMetrics(self._member_count)
        self.resizer = Resizer(self, elastic) if elastic is not None else None
        self.book = DeathBook(node_id())  # when each worker was known gone
        for _ in range(size):
            wid, handle = self._new_worker()
            self.workers[wid] = handle
        for _ in range(spare):
            self.spares.append(self._new_worker())

    def _new_worker(self) -> tuple[str, Handle]:
        wid = f"w{next(self._ids)}.{self._epoch % 10**6:06d}"
        return wid, create_worker(self._options, self._settings)

    # ------------------------------------------------------------------ membership
    def _watch(self) -> None:
        """Learn when each worker and spare starts (a member only once it answered)."""
        if self.resizer is not None:
            self.resizer.start()  # on the actor's loop, at the first call that has one
        for wid, handle in [*self.workers.items(), *self.spares]:
            if wid not in self._watched:
                self._watched.add(wid)
                self._spawn(self._await_start(wid, handle))

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _await_start(self, wid: str, handle: Handle) -> None:
        try:
            await send(handle, ToolWorker.health)
            await send(handle, ToolWorker.warm_up)
        except Exception:  # typically the namespace shutting down: nothing to tell a user
            _log.debug("toolray: worker %s failed to start", wid, exc_info=True)
            return
        self._started(wid)
        await self._await_death(wid, handle)

    async def _await_death(self, wid: str, handle: Handle) -> None:
        """Learn of ``wid``'s death as it happens (not when a call next meets it)."""
        try:
            await send(handle, ToolWorker.until_death)
        except Exception as err:
            if not is_dead_actor(err):  # no word on its life: a call that meets it will say
                _log.debug("toolray: no death watch on worker %s", wid, exc_info=True)
                return
            if "ray.kill" in str(err):  # killed on purpose: whoever killed it replaces it (and
                return  # Ray may say so before the kill lands: no record of it)
            self.book.record(wid)  # its process exited before Ray said it died
        else:  # it never answers
            return
        if wid in self.workers:  # died on its own: a member no longer
            await self.replace(wid, killed=False)
        elif any(w == wid for w, _ in self.spares):
            self.spares = [(w, h) for w, h in self.spares if w != wid]
            self._refill_spares()

    def _started(self, wid: str) -> None:
        if wid in self.started:
            return
        self.started.add(wid)
        if wid in self.workers:
            self._bump()

    def _bump(self) -> None:
        self.version += 1
        self._metrics.resized()
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _member_count(self) -> int:
        return sum(1 for w in self.workers if w in self.started)

    def _members(self) -> tuple[tuple[int, int], list[tuple[str, Handle]]]:
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
        return self._member_count()

    async def members(self) -> tuple[tuple[int, int], list[tuple[str, Handle]]]:
        """``(version, [(worker id, handle), …])`` of the started workers."""
        self._watch()
        return self._members()

    async def wait_members(
        self, version: tuple[int, int], timeout_s: float = _MEMBERS_POLL_S
    ) -> tuple[tuple[int, int], list[tuple[str, Handle]]]:
        """:meth:`members`, once the version differs from ``version`` (or after a bound)."""
        self._watch()
        if (self._epoch, self.version) == tuple(version):
            if self._changed is None:
                self._changed = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(timeout_s, _MEMBERS_POLL_S))
        return self._members()

    async def grow(self, waiting: int) -> int:
        """``waiting`` calls of one executor wait for a worker: add some (elastic pools)."""
        self._watch()
        return self.resizer.grow(waiting) if self.resizer is not None else 0

    async def never_ran(self, wid: str, sent: SentAt) -> bool:
        """Whether a message sent to ``wid`` at ``sent`` that met it gone cannot have run.

        It cannot if this pool retired ``wid`` (drained first), or learned of its death
        before the message left (:mod:`._deaths`).
        """
        if self.resizer is not None and self.resizer.was_retired(wid):
            return True
        return self.book.before(wid, sent)

    async def replace(
        self, wid: str, killed: bool
    ) -> tuple[tuple[int, int], list[tuple[str, Handle]]]:
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

    async def _alive(self, handle: Handle) -> bool:
        try:
            await asyncio.wait_for(_as_future(send(handle, ToolWorker.health)), _HEALTH_TIMEOUT_S)
        except Exception:
            return False
        return True

    async def _drop_dead(self) -> None:
        members = list(self.workers.items())
        alive = await asyncio.gather(*(self._alive(h) for _, h in members))
        for (wid, handle), ok in zip(members, alive, strict=True):
            if not ok:  # dead, or too slow to answer: its death is recorded once it landed
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
                asyncio.wait_for(_as_future(send(h, ToolWorker.actor_stats)), _HEALTH_TIMEOUT_S)
                for h in handles
            ),
            return_exceptions=True,
        )
        return [own, *(s for s in found if isinstance(s, ActorStats))]

    async def stats(self, name: str = "") -> PoolStats:
        """Counters for ``RayRuntime.stats()`` (``workers``: started members only)."""
        policy = self.resizer.policy if self.resizer is not None else None
        live = list(self.workers.items())
        found = await asyncio.gather(
            *(
                asyncio.wait_for(_as_future(send(h, ToolWorker.status)), _HEALTH_TIMEOUT_S)
                for _, h in live
            ),
            return_exceptions=True,
        )
        answered = [s for s in found if not isinstance(s, BaseException)]
        for (wid, _), status in zip(live, found, strict=True):
            if not isinstance(status, BaseException):
                self._children[wid] = status.children
        seen = self._children.values()
        now = [self._children[w] for w, _ in live if w in self._children]
        return PoolStats(
            name=name,
            isolation=self._settings.isolation,
            workers=self._member_count(),
            spares=len(self.spares),
            kills=self.kills,
            deaths=self.deaths,
            replacements=self.replacements,
            version=self.version,
            size=len(self.workers),
            min_size=policy.min_size if policy is not None else self._size,
            max_size=policy.max_size if policy is not None else self._size,
            grown=self.resizer.grown if self.resizer is not None else 0,
            retired=self.resizer.retired_count if self.resizer is not None else 0,
            child_kills=sum(c.kills for c in seen),
            child_deaths=sum(c.deaths for c in seen),
            child_replacements=sum(c.replacements for c in seen),
            child_descendants=sum(c.descendants for c in seen),
            children=sum(c.live for c in now),
            children_busy=sum(c.live - c.idle for c in now),
            child_pids=tuple(pid for c in now for pid in c.pids),
            instances=sum(s.instances for s in answered),
            instance_pids=tuple(pid for s in answered for pid in s.instance_pids),
        )

    async def shutdown(self) -> None:
        """Kill every worker and spare."""
        self._metrics.stop()
        for handle in [*self.workers.values(), *(h for _, h in self.spares)]:
            kill(handle)
        self.workers.clear()
        self.spares.clear()


async def _started(handle: Handle) -> None:
    """A worker answers, and its call processes (``"call"``) are warm."""
    await send(handle, ToolWorker.health)
    await send(handle, ToolWorker.warm_up)


def start_pool(plan: PoolPlan, namespace: str, control: dict[str, object]) -> PoolClient:
    """Start (or find) the manager actor of ``plan``'s pool; the executor's client of it."""
    elastic = None
    if plan.elastic:
        elastic = ElasticPolicy(
            min_size=plan.min_size,
            max_size=plan.max_size,
            idle_s=plan.idle_s,
            per_worker=plan.max_concurrency,
        )
    manager = create_pool(
        PoolManager,
        plan.key,
        namespace,
        control,
        plan.size,
        plan.spare,
        plan.options,
        plan.worker,
        elastic,
    )
    return PoolClient(
        manager,
        plan.isolation,
        per_worker=plan.max_concurrency,
        elastic=plan.elastic,
        max_queue_ms=plan.max_queue_ms,
    )
