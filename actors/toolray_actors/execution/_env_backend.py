"""Where an executor's environment instances live: on the workers of their placement's pool.

:class:`RayEnvironments` is the core's ``EnvironmentBackend`` inside an executor actor.
Opening an instance picks the pool member holding the fewest of this executor's instances;
the worker keeps it (in a process of its own with ``isolation="call"``, in its memory with
``"shared"``) and every call of it goes there (the body runner reads the call's
:class:`RayInstance`). Parking puts the snapshot's bytes in Ray's object store (owned by
this executor) and ends the instance's process; its next use restores it on a member.

An instance is lost — never re-created behind its agent's back — when its process dies,
when the cancellation ladder kills it, or when the worker holding it dies (its pool slot is
then ``gone``): the core's instances ask :meth:`RayEnvironments.lost` after every use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Concatenate, ParamSpec, TypeVar, cast

import cloudpickle
import ray
import ray.exceptions as rex

from toolray import EnvironmentDefinition, EnvironmentLostError
from toolray.lowlevel import InstanceRef, Parked, lost_error
from toolray_actors._env_wire import ForkCopy, InstanceInfo
from toolray_actors._errors import is_actor_death, task_cause, translate
from toolray_actors._remote import put, send

from ._env_lane import read_reply, request
from ._lane import LaneClient
from ._placements import Placements
from ._pool_client import PoolClient, WorkerSlot
from ._worker import ToolWorker

__all__ = ("RayEnvironments", "RayInstance", "Returned", "Shipped")

_T = TypeVar("_T")
_R = TypeVar("_R")
_P = ParamSpec("_P")

_WORKER_DIED = "the worker holding it died"


def held_at(wid: str, iid: str) -> bytes:
    """Where an executor's record says an instance lives: its worker and instance id."""
    return f"{wid} {iid}".encode()


@dataclass(eq=False, slots=True)
class RayInstance:
    """One instance as its executor knows it: the worker holding it and its process."""

    iid: str
    name: str
    key: str
    blob: bytes
    pool: PoolClient
    slot: WorkerSlot
    pid: int
    node: str
    lost: str | None = None

    @property
    def where(self) -> bytes:
        """Its worker and instance id, as its executor's record of it says."""
        return held_at(self.slot.wid, self.iid)

    def lose(self, why: str) -> EnvironmentLostError:
        """It is lost (``why``): the error its call in flight ends with."""
        self.lost = self.lost or why
        return lost_error(self.name, self.lost)


@dataclass(frozen=True, slots=True)
class _ParkedHere:
    """A parked instance's token: its snapshot in the object store, and what restores it."""

    ref: object
    key: str
    blob: bytes


@dataclass(frozen=True, slots=True)
class Shipped:
    """``run``'s function as a driver pickled it (this process never unpickles it)."""

    data: bytes

    def __call__(self, *args: object) -> object:  # the core checks callability only
        raise TypeError("a shipped function runs where the state lives, not here")


@dataclass(frozen=True, slots=True)
class Returned:
    """``run``'s value as the environment pickled it, on its way to the driver."""

    data: bytes


class RayEnvironments:
    """The ``EnvironmentBackend`` of one executor actor."""

    def __init__(
        self,
        placements: Placements,
        key_of: Callable[[object], tuple[str, bytes] | None],
        record: Callable[[str | None, str, bytes | None], Awaitable[None]] | None = None,
        lanes: Callable[[WorkerSlot], LaneClient | None] | None = None,
    ) -> None:
        self._placements = placements
        self._key_of = key_of
        self._record = record
        """Told where each new instance of a scope lives (``None``: it did not open), and
        awaited before its first use."""
        self._lanes = lanes
        """A worker's open local lane (``None``: its verbs go as Ray calls)."""
        self._held: dict[str, int] = {}  # wid → instances this executor placed there

    # ------------------------------------------------------------------ placing
    def code(self, definition: EnvironmentDefinition) -> tuple[str, bytes]:
        """The definition's cache key and pickled blob (as its workers load it)."""
        found = self._key_of(definition)
        if found is None:  # not a mirrored definition
            blob = bytes(cloudpickle.dumps(definition))
            return f"envdef:{definition.name}", blob
        return found

    def _verb(
        self,
        slot: WorkerSlot,
        method: Callable[Concatenate[ToolWorker, _P], Coroutine[object, object, _R]],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> Awaitable[_R]:
        """``method(*args)`` of the slot's worker: on its local lane when open, else on Ray.

        A reference into the object store (a parked snapshot) goes on Ray, which hands the
        worker its bytes.
        """
        client = self._lanes(slot) if self._lanes is not None else None
        if client is None or kwargs or any(isinstance(a, ray.ObjectRef) for a in args):
            return send(slot.handle, method, *args, **kwargs)
        return cast("Awaitable[_R]", _on_lane(client, request(method.__name__, *args)))

    async def _pick(self, pool: PoolClient) -> WorkerSlot:
        if not pool.slots:
            await pool.pick(None)
        return min(pool.slots.values(), key=lambda s: self._held.get(s.wid, 0))

    def _placed(
        self,
        ref: InstanceRef,
        key: str,
        blob: bytes,
        pool: PoolClient,
        slot: WorkerSlot,
        info: InstanceInfo,
    ) -> RayInstance:
        self._held[slot.wid] = self._held.get(slot.wid, 0) + 1
        return RayInstance(ref.iid, ref.name, key, blob, pool, slot, info.pid, info.node)

    def _unplaced(self, placed: RayInstance) -> None:
        left = self._held.get(placed.slot.wid, 0) - 1
        if left > 0:
            self._held[placed.slot.wid] = left
        else:
            self._held.pop(placed.slot.wid, None)

    async def _open(
        self,
        ref: InstanceRef,
        key: str,
        blob: bytes,
        definition: EnvironmentDefinition,
        config: object,
        snapshot: object,
        *,
        new: bool = True,
    ) -> RayInstance:
        pool = self._placements.pool_for(definition.placement)
        slot = await self._pick(pool)
        data = cast("bytes | None", snapshot)  # Ray hands the worker a reference's bytes
        record = self._record if new else None  # a parked one's record stayed while parked
        # written while the worker opens it, awaited before its first use can answer
        recorded = record(ref.scope, ref.name, held_at(slot.wid, ref.iid)) if record else None
        opened = self._verb(slot, ToolWorker.env_open, ref.iid, key, blob, config, data)
        try:
            info = await self._call(None, pool, slot, opened)
        except BaseException:
            if record is not None:
                record(ref.scope, ref.name, None)  # it never opened: not held
            raise
        if recorded is not None:
            await recorded
        return self._placed(ref, key, blob, pool, slot, info)

    async def _call(
        self, placed: RayInstance | None, pool: PoolClient, slot: WorkerSlot, ref: Awaitable[_T]
    ) -> _T:
        """Await a worker's answer: its own failure raised, its death an instance's loss."""
        try:
            return await ref
        except EnvironmentLostError as err:  # the worker's own word (on the local lane)
            if placed is not None:
                placed.lost = str(err)
            raise
        except rex.RayError as err:
            if is_actor_death(err):
                if placed is not None:
                    placed.lost = _WORKER_DIED
                if slot.wid in pool.slots:
                    await pool.replace(slot, killed=False)
                raise EnvironmentLostError(_WORKER_DIED) from None
            cause = task_cause(err)
            if isinstance(cause, rex.RayError):
                raise translate(cause, "a worker") from None
            if isinstance(cause, EnvironmentLostError) and placed is not None:
                placed.lost = str(cause)
            raise cause from None

    async def _operate(
        self, placed: RayInstance, op: str, data: bytes | None = None
    ) -> bytes | None:
        ref = self._verb(placed.slot, ToolWorker.env_operate, placed.iid, op, data)
        return await self._call(placed, placed.pool, placed.slot, ref)

    def forget(self, placed: RayInstance) -> None:
        """A fork's live copy leaves this executor (another one adopts it)."""
        self._unplaced(placed)

    def adopt(self, copy: ForkCopy, pool: PoolClient, slot: WorkerSlot) -> RayInstance:
        """A live fork's copy another executor made, now this one's."""
        info = InstanceInfo(pid=copy.pid, node=copy.node)
        ref = InstanceRef(scope=None, name=copy.name, iid=copy.iid)
        return self._placed(ref, copy.key, copy.blob, pool, slot, info)

    async def _bytes(self, placed: RayInstance, op: str, data: bytes | None = None) -> bytes:
        out = await self._operate(placed, op, data)
        if out is None:
            raise RuntimeError(f"the instance's {op} answered nothing")
        return out

    # ------------------------------------------------------------------ the backend
    async def create(
        self, ref: InstanceRef, definition: EnvironmentDefinition, config: object
    ) -> RayInstance:
        """A new instance on a worker of the definition's pool."""
        key, blob = self.code(definition)
        return await self._open(ref, key, blob, definition, config, None)

    async def restore(
        self, ref: InstanceRef, definition: EnvironmentDefinition, data: object
    ) -> RayInstance:
        """A new instance from snapshot bytes, or from this executor's parked snapshot."""
        if isinstance(data, Parked) and isinstance(data.token, _ParkedHere):
            token = data.token  # Ray hands the worker the bytes behind the reference
            return await self._open(
                ref, token.key, token.blob, definition, None, token.ref, new=False
            )
        key, blob = self.code(definition)
        return await self._open(ref, key, blob, definition, None, data)

    async def fork(
        self, placed: RayInstance, ref: InstanceRef, definition: EnvironmentDefinition
    ) -> RayInstance:
        """A copy on the same worker: its process forked, or the definition's callable."""
        how = "process" if definition.fork == "process" else "callable"
        handle_ref = self._verb(placed.slot, ToolWorker.env_fork, placed.iid, ref.iid, how)
        info = await self._call(placed, placed.pool, placed.slot, handle_ref)
        return self._placed(ref, placed.key, placed.blob, placed.pool, placed.slot, info)

    async def snapshot(self, placed: RayInstance, definition: EnvironmentDefinition) -> bytes:
        """The snapshot's bytes, taken where the state lives."""
        return await self._bytes(placed, "snapshot")

    async def run(self, placed: RayInstance, fn: object, args: tuple[object, ...]) -> object:
        """``fn(state, *args)`` on the worker (a :class:`Shipped` one stays pickled)."""
        data = fn.data if isinstance(fn, Shipped) else bytes(cloudpickle.dumps((fn, args)))
        out = await self._bytes(placed, "run", data)
        return Returned(out) if isinstance(fn, Shipped) else cloudpickle.loads(out)

    async def park(self, placed: RayInstance, definition: EnvironmentDefinition) -> Parked:
        """Snapshot into the object store; the instance's process ends."""
        data = await self._bytes(placed, "park")
        self._unplaced(placed)
        token = _ParkedHere(put(data), placed.key, placed.blob)
        return Parked(token=token, size=len(data))

    async def close(self, placed: RayInstance, definition: EnvironmentDefinition) -> None:
        """Run ``close`` where the state lives; the instance ends."""
        self._unplaced(placed)
        if placed.lost is None and not placed.slot.gone:
            await self._operate(placed, "close")

    async def discard(self, placed: RayInstance) -> None:
        """Free what is left of a lost instance (best effort: its worker may be gone)."""
        self._unplaced(placed)
        if not placed.slot.gone:
            with contextlib.suppress(Exception):  # its worker may be gone meanwhile
                await self._verb(placed.slot, ToolWorker.env_discard, placed.iid)

    def lost(self, placed: RayInstance) -> str | None:
        """Why the instance is gone, or ``None`` while it lives."""
        if placed.lost is None and placed.slot.gone:
            placed.lost = _WORKER_DIED
        lost: str | None = placed.lost
        return lost

    def where(self, placed: RayInstance) -> tuple[str | None, int | None]:
        """Its node and process."""
        return placed.node, placed.pid

    def state_of(self, placed: RayInstance) -> object:
        """Bodies run on the worker, not in this executor."""
        return None


async def _on_lane(client: LaneClient, payload: bytes) -> object:
    return read_reply(await client.ask(payload))
