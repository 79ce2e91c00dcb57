"""An executor actor's environment instances: the component its ``environment`` method asks.

It holds the core's :class:`~toolray.lowlevel.Instances` over :class:`RayEnvironments`
(the same object in every mirror the actor rebuilds, so a resync loses no instance),
answers the drivers' handles (one request record each, matched exhaustively), parks idle
instances on the actor's loop, and closes a scope's instances when the scope is disposed
or the namespace ends.

A fork crosses executors: the source's executor makes the copy (:class:`ForkCopy`: a
snapshot in the object store, or a live process-forked instance on the source's worker)
and the target's adopts it; a copy nobody adopts is discarded where it lives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from toolray import Clock, EnvironmentDefinition, EnvironmentStatus
from toolray.lowlevel import EnvironmentEvent, InstanceCounts, Instances, failed_error
from toolray_actors._env_wire import (
    EnvClose,
    EnvForkHere,
    EnvForkIn,
    EnvForkOut,
    EnvOpen,
    EnvRequest,
    EnvRun,
    EnvSnapshot,
    EnvStatusOf,
    ForkCopy,
    SnapshotReply,
)
from toolray_actors._mirror import Mirror
from toolray_actors._remote import put, send
from toolray_actors._wire import unknown
from toolray_actors.control._store import Store

from ._env_backend import RayEnvironments, RayInstance, Returned, Shipped
from ._lane import LaneClient
from ._metrics import EnvMetrics, flush_every
from ._placements import Placements
from ._pool_client import WorkerSlot
from ._worker import ToolWorker

__all__ = ("EnvService",)

_log = logging.getLogger("toolray")
_PARK_LOOK_S = 5.0
"""How often the parker looks when nothing is due sooner."""
_FLUSH_S = 1.0
"""How often the events counted here reach the Ray metrics."""
_DISPOSE_WAIT_S = 10.0
"""How long a disposed scope's instances may take to close before they are discarded."""


_Note = tuple[str | None, str, bytes | None, "asyncio.Future[None]"]


class _Held:
    """Which instances this executor holds, kept in the GCS in order (one writer task).

    A successor of this actor (after its death) finds them and reports each lost: an
    instance is never re-created behind its agent's back.
    """

    def __init__(self, store: Store, executor: str) -> None:
        self._store, self._executor = store, executor
        self._queue: asyncio.Queue[_Note] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None

    def note(self, scope: str | None, name: str, where: bytes | None) -> asyncio.Future[None]:
        """Held at ``where`` (``None``: no longer held); done once it is written (or failed).

        A new instance's record is awaited before its first call's result can leave: an
        executor killed right after would otherwise come back knowing nothing of it.
        """
        done = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((scope, name, where, done))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._write())
        return done

    async def _write(self) -> None:
        """Write what is queued, per instance its latest word (earlier ones are moot).

        Different instances' records are written at once; one instance's stay in order (one
        batch at a time).
        """
        while not self._queue.empty():
            latest: dict[tuple[str | None, str], bytes | None] = {}
            waiting: list[asyncio.Future[None]] = []
            while not self._queue.empty():
                scope, name, where, done = self._queue.get_nowait()
                latest[(scope, name)] = where
                waiting.append(done)
            try:
                await asyncio.gather(*(self._put(s, n, w) for (s, n), w in latest.items()))
            finally:
                for done in waiting:
                    if not done.done():
                        done.set_result(None)

    async def _put(self, scope: str | None, name: str, where: bytes | None) -> None:
        try:
            if where is None:
                await asyncio.to_thread(self._store.del_instance, self._executor, scope, name)
            else:
                args = (self._executor, scope, name, where)
                await asyncio.to_thread(self._store.put_instance, *args)
        except Exception:  # the GCS is restarting: this record is lost, not the instance
            _log.debug("toolray: could not record an instance", exc_info=True)

    async def previous(self) -> list[tuple[str | None, str, bytes]]:
        """What this executor's previous incarnation held."""
        return await asyncio.to_thread(self._store.instances, self._executor)


class EnvService:
    """The environment instances of one executor actor, and its drivers' requests."""

    def __init__(
        self,
        placements: Placements,
        mirror: Callable[[], Mirror],
        clock: Clock,
        executor: str,
        lanes: Callable[[WorkerSlot], LaneClient | None] | None = None,
    ) -> None:
        self._mirror = mirror
        self._placements = placements
        self._held = _Held(Store(placements.namespace), executor)
        self.backend = RayEnvironments(
            placements, lambda d: self._mirror().key_of(d), record=self._held.note, lanes=lanes
        )
        self.instances = Instances(self.backend, self._resolve, clock)
        self.metrics = EnvMetrics()
        self.instances.listeners.append(self._changed)
        self._parker: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[None] | None = None
        self._freeing: asyncio.Future[None] | None = None
        self._orphans: list[tuple[str | None, str, bytes]] = []

    def _changed(self, event: EnvironmentEvent) -> None:
        scope, name = event.scope, event.environment
        self.metrics.pending.append((name, event.event))
        if event.event == "close":  # a new instance's record is written as it is placed
            self._held.note(scope, name, None)

    def _resolve(self, scope: str | None, name: str) -> EnvironmentDefinition | None:
        found: EnvironmentDefinition | None = self._mirror().registry.environment_definition(
            name, scope
        )
        return found

    # ------------------------------------------------------------------ requests
    async def handle(self, request: EnvRequest) -> object:
        """One request of a driver's environment handle."""
        instances = self.instances
        match request:
            case EnvOpen(scope=scope, name=name, config=config):
                return await instances.open(scope, name, config)
            case EnvSnapshot(scope=scope, name=name):
                data, definition = await instances.snapshot(scope, name)
                key, blob = self.backend.code(definition)
                return SnapshotReply(data=data, key=key, blob=blob)
            case EnvRun(scope=scope, name=name, data=data):
                returned = await instances.run(scope, name, Shipped(data), ())
                assert isinstance(returned, Returned)
                return returned.data
            case EnvForkOut(scope=scope, name=name, to_scope=to_scope):
                return await self._fork_out(scope, name, to_scope)
            case EnvForkIn(scope=scope, name=name, copy=copy):
                return await self._fork_in(scope, name, copy)
            case EnvForkHere(scope=scope, name=name, to_scope=to_scope):
                return await self._fork_here(scope, name, to_scope)
            case EnvClose(scope=scope, name=name):
                await instances.close(scope, name)
                return None
            case EnvStatusOf(scope=scope, name=name):
                return instances.status(scope, name)
            case _:
                unknown(request, "an environment request")
        return None

    async def _fork_out(self, scope: str | None, name: str, to_scope: str | None) -> ForkCopy:
        """The copy ``to_scope``'s executor adopts: a snapshot, or a process-forked instance."""
        out = await self.instances.fork_out(scope, name, to_scope)
        key, blob = self.backend.code(out.definition)
        if isinstance(out.value, bytes):
            ref = put(out.value)
            size = len(out.value)
            return ForkCopy(name=name, key=key, blob=blob, snapshot=ref, size=size, iid=out.iid)
        placed: RayInstance = out.value
        pool = next(k for k, c in self._placements.pools.items() if c is placed.pool)
        self.backend.forget(placed)  # the target's executor owns it from now on
        return ForkCopy(
            name=name,
            key=key,
            blob=blob,
            pool=pool,
            wid=placed.slot.wid,
            iid=placed.iid,
            pid=placed.pid,
            node=placed.node,
        )

    async def _fork_in(self, scope: str | None, name: str, copy: ForkCopy) -> EnvironmentStatus:
        """Adopt a fork's copy as ``scope``'s instance (a copy not adopted is discarded)."""
        definition = self._mirror().registry.environment_definition(name, scope)
        try:
            if definition is None:
                raise failed_error(name, "fork", LookupError(f"{scope!r} does not see it"))
            if copy.snapshot is not None:
                return await self.instances.fork_in(
                    scope, name, definition, copy.snapshot, copy.iid, live=False
                )
            placed = await self._adopt(copy, definition)
        except BaseException:
            if copy.snapshot is None:
                await self._discard_copy(copy, definition)
            raise
        status = await self.instances.fork_in(scope, name, definition, placed, copy.iid, live=True)
        await self._held.note(scope, name, placed.where)  # before the branch's first call
        return status

    async def _fork_here(
        self, scope: str | None, name: str, to_scope: str | None
    ) -> EnvironmentStatus:
        """A fork between two scopes of this executor: the copy never leaves it."""
        out = await self.instances.fork_out(scope, name, to_scope)
        live = not isinstance(out.value, bytes)
        try:
            status = await self.instances.fork_in(
                to_scope, name, out.definition, out.value, out.iid, live=live
            )
        except BaseException:
            if live:  # a copy nobody took: its process goes
                await self.backend.discard(out.value)
            raise
        if live:
            await self._held.note(to_scope, name, out.value.where)  # before its first call
        return status

    async def _adopt(self, copy: ForkCopy, definition: EnvironmentDefinition) -> RayInstance:
        pool = self._placements.pool_for(definition.placement)
        slot = pool.slots.get(copy.wid)
        if slot is None:
            await pool.refresh()
            slot = pool.slots.get(copy.wid)
        if slot is None:
            raise failed_error(copy.name, "fork", LookupError("the copy's worker is gone"))
        return self.backend.adopt(copy, pool, slot)

    async def _discard_copy(self, copy: ForkCopy, definition: EnvironmentDefinition | None) -> None:
        placement = definition.placement if definition is not None else None
        slot = self._placements.pool_for(placement).slots.get(copy.wid)
        if slot is not None:
            with contextlib.suppress(Exception):  # its worker may be gone meanwhile
                await send(slot.handle, ToolWorker.env_discard, copy.iid)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> asyncio.Future[None]:
        """Report what a predecessor held as lost, then park idle instances (once).

        Every ``ready`` awaits it: no call of a scope runs before its lost instances are known.
        """
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        return self._starting

    async def _start(self) -> None:
        self._parker = asyncio.ensure_future(self._park_loop())
        self._flusher = asyncio.ensure_future(flush_every(_FLUSH_S, self._flush))
        try:
            held = await self._held.previous()
        except Exception:  # no GCS answer: nothing known to report
            _log.debug("toolray: could not read the instances held before", exc_info=True)
            return
        for scope, name, _ in held:
            self.instances.orphan(scope, name, "the executor actor holding it died")
        self._orphans = held

    def free_orphans(self) -> None:
        """End what a predecessor's instances left running on the pools' workers.

        Called once the registry is mirrored: each definition names its instance's pool.
        """
        held, self._orphans = self._orphans, []
        if held:
            self._freeing = asyncio.ensure_future(self._free_orphans(held))

    async def _free_orphans(self, held: list[tuple[str | None, str, bytes]]) -> None:
        for scope, name, where in held:
            wid, _, iid = where.decode().partition(" ")
            definition = self._resolve(scope, name)
            if not iid or definition is None:  # not placed, or no longer registered
                continue
            try:
                pool = self._placements.pool_for(definition.placement)
                await pool.refresh()
                slot = pool.slots.get(wid)
                if slot is not None:  # else its worker went too, and the instance with it
                    await send(slot.handle, ToolWorker.env_discard, iid)
            except Exception:  # the worker is gone: so is what it held
                _log.debug("toolray: could not free an orphaned instance", exc_info=True)

    def _flush(self) -> None:
        counts = self.instances.counts()
        self.metrics.flush(counts.open, counts.parked, counts.lost)

    async def _park_loop(self) -> None:
        clock = self.instances.clock
        while True:
            due = self.instances.next_park_at()
            wait = _PARK_LOOK_S if due is None else min(max(due - clock.now(), 0.01), _PARK_LOOK_S)
            await asyncio.sleep(wait)
            try:
                await self.instances.park_idle()
            except Exception:  # one instance's failure to park never stops the parker
                _log.warning("toolray: parking failed", exc_info=True)

    async def close_scope(self, scope: str | None) -> None:
        """A disposed scope's instances close (discarded if their close takes too long)."""
        try:
            await asyncio.wait_for(self.instances.close_scope(scope), _DISPOSE_WAIT_S)
        except TimeoutError:
            for placed in self.instances.abandon(scope):
                await self.backend.discard(placed)

    async def close_all(self) -> int:
        """Every instance closes (the namespace ends)."""
        return await self.instances.close_all()

    def holding(self) -> bool:
        """Whether any instance is open, parked or lost here (the actor must stay)."""
        counts = self.instances.counts()
        return bool(counts.open or counts.parked or counts.lost)

    def counts(self) -> InstanceCounts:
        """The instances by state and the lifecycle counters."""
        return self.instances.counts()
