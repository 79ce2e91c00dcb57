"""``Instances``: one registry's environment instances — turns and lifecycle over a backend.

One instance per (scope, name): ``open`` (``create(config)``, the previous one closed
first) → calls, ``snapshot``, ``run``, ``fork`` → ``close``. An idle one parks (snapshot,
freed) and comes back on its next use; one whose process died is ``lost`` — every use fails
``ENVIRONMENT_LOST`` until the next ``open``, never re-created behind the agent's back. A
call of an instance that is not open opens it with ``config=None`` first. Every change
happens inside an exclusive turn (:mod:`._turns`); the states live in a backend.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from toolray._clock import Clock
from toolray._signals import AbortSignal
from toolray.errors import EnvironmentFailedError, EnvironmentLostError, UnknownEnvironmentError

from ._backend import EnvironmentBackend, InstanceRef
from ._definition import EnvironmentDefinition, EnvironmentStatus
from ._events import EnvironmentEvent, notify
from ._record import (
    ForkOut,
    Instance,
    InstanceCounts,
    Table,
    failed_error,
    guarded,
    json_config,
    lost_error,
    new_iid,
)
from ._turns import unless_aborted

__all__ = ("Instances", "Resolver")

Resolver = Callable[[str | None, str], EnvironmentDefinition | None]
"""The environment a scope sees under a name (``None``: none registered where it can see)."""

_log = logging.getLogger("toolray")
_COUNTED = {"open": "opens", "park": "parks", "restore": "restores", "fork": "forks"}
_COUNTED["lost"] = "losses"


class Instances:
    """The environment instances of one registry (or one Ray executor's scopes)."""

    def __init__(self, backend: EnvironmentBackend, resolve: Resolver, clock: Clock) -> None:
        self.backend = backend
        self.clock = clock
        self._resolve = resolve
        self._table = Table()
        self._counts = dict.fromkeys(_COUNTED.values(), 0)
        self.listeners: list[Callable[[EnvironmentEvent], object]] = []
        """Each told every :class:`EnvironmentEvent` of these instances."""

    def _definition(self, scope: str | None, name: str) -> EnvironmentDefinition:
        if (definition := self._resolve(scope, name)) is None:
            raise UnknownEnvironmentError(name)
        return definition

    def _event(self, event: str, inst: Instance, since: float | None = None) -> None:
        if event in _COUNTED:
            self._counts[_COUNTED[event]] += 1
        seconds = 0.0 if since is None else max(0.0, self.clock.now() - since)
        what = EnvironmentEvent(
            event=event,
            environment=inst.name,
            scope=inst.scope,
            seconds=seconds,
            reason=inst.lost_why if event == "lost" else "",
        )
        notify(what, self.listeners)

    # ------------------------------------------------------------------ transitions
    async def _create(self, inst: Instance, definition: EnvironmentDefinition, config: Any) -> Any:
        inst.iid, since = new_iid(definition.name), self.clock.now()
        try:
            placed = await self.backend.create(inst.ref(), definition, config)
        except EnvironmentLostError as err:  # its process died opening it: lost, not closed
            self._lose(inst, str(err))  # (a later call must not open another silently)
            raise
        except Exception as err:
            raise failed_error(definition.name, "create", err) from None
        inst.opened(definition, placed, self.clock.now())
        self._event("open", inst, since)
        return placed

    def _lose(self, inst: Instance, why: str) -> None:
        if inst.state != "lost":
            inst.state, inst.lost_why, inst.parked = "lost", why, None
            self._event("lost", inst)

    async def _end(self, inst: Instance) -> None:
        """Close whatever ``inst`` holds (its ``close`` runs on a live or parked state)."""
        definition, placed, parked, state = inst.definition, inst.placed, inst.parked, inst.state
        inst.state, inst.placed, inst.parked = "closed", None, None
        if state == "closed":
            return
        since, backend = self.clock.now(), self.backend
        try:
            if definition is None:  # an orphan: nothing of it is here to close
                pass
            elif state == "open":
                await backend.close(placed, definition)
            elif state == "parked" and parked is not None and definition.close is not None:
                restored = await backend.restore(inst.ref(), definition, parked)
                await backend.close(restored, definition)
            elif state == "lost" and placed is not None:
                await backend.discard(placed)
        except Exception:  # a close that raises still ends the instance
            _log.warning("toolray: closing environment %r failed", inst.name, exc_info=True)
        self._event("close", inst, since)

    async def _ready(self, inst: Instance, definition: EnvironmentDefinition) -> Any:
        """The instance's live handle, opened or restored first (in an exclusive turn)."""
        if inst.state == "open":
            return inst.placed
        if inst.state == "lost":
            raise lost_error(inst.name, inst.lost_why)
        if inst.state == "parked" and inst.definition is not None and inst.parked is not None:
            since = self.clock.now()
            try:
                inst.placed = await self.backend.restore(inst.ref(), inst.definition, inst.parked)
            except Exception as err:
                self._lose(inst, f"its parked state could not be restored: {err}")
                raise lost_error(inst.name, inst.lost_why) from None
            inst.state, inst.parked = "open", None
            self._event("restore", inst, since)
            return inst.placed
        return await self._create(inst, definition, None)

    def _used(self, inst: Instance, placed: Any, *, call: bool) -> None:
        """After a use: the counters, and whether the backend lost the instance meanwhile."""
        inst.used(self.clock.now(), call=call)
        live = placed is not None and inst.state == "open" and inst.placed is placed
        if live and (why := self.backend.lost(placed)) is not None:
            self._lose(inst, why)

    def _still(self, inst: Instance) -> None:
        """Raise ``ENVIRONMENT_LOST`` if the use just made lost the instance."""
        if inst.state == "lost":
            raise lost_error(inst.name, inst.lost_why)

    @contextlib.asynccontextmanager
    async def _exclusive(self, scope: str | None, name: str) -> AsyncIterator[Instance]:
        inst = self._table.at(scope, name)
        turn = await inst.turns.enter(exclusive=True)
        try:
            yield inst
        finally:
            inst.turns.leave(turn)
            self._table.forget_if_idle(inst)

    @contextlib.asynccontextmanager
    async def _live(
        self, scope: str | None, name: str
    ) -> AsyncIterator[tuple[Instance, Any, EnvironmentDefinition]]:
        """An exclusive turn on a ready instance: ``(record, live handle, its definition)``."""
        definition = self._definition(scope, name)
        async with self._exclusive(scope, name) as inst:
            placed = await self._ready(inst, definition)
            assert inst.definition is not None
            try:
                yield inst, placed, inst.definition
            finally:
                self._used(inst, placed, call=False)

    # ------------------------------------------------------------------ calls
    @contextlib.asynccontextmanager
    async def call(
        self,
        scope: str | None,
        name: str,
        *,
        exclusive: bool,
        signal: AbortSignal | None = None,
        token: Any = None,
        parent: Any = None,
    ) -> AsyncIterator[Any]:
        """Hold ``name``'s instance of ``scope`` for one call; yields its live handle.

        Raises ``UnknownEnvironmentError``, ``EnvironmentFailedError`` (an automatic open's
        ``create`` raised), ``EnvironmentLostError``, or ``AbortError`` (aborted waiting).
        """
        definition = self._definition(scope, name)
        inst = self._table.at(scope, name)
        while True:
            turn = await inst.turns.enter(
                exclusive=exclusive, signal=signal, token=token, parent=parent
            )
            if inst.state == "open" or turn.nested or turn.exclusive:
                break
            inst.turns.leave(turn)  # a shared turn: the instance is made ready alone first
            ready = await inst.turns.enter(exclusive=True, signal=signal)
            leave = functools.partial(inst.turns.leave, ready)
            await unless_aborted(self._ready(inst, definition), signal, leave)
        if inst.state == "open":
            placed = inst.placed
        else:  # opened or restored first: a deadline or abort need not wait for that
            leave = functools.partial(inst.turns.leave, turn)
            placed = await unless_aborted(self._ready(inst, definition), signal, leave, keep=True)
        try:
            yield placed
        finally:
            if placed is not None:
                self._used(inst, placed, call=True)
            inst.turns.leave(turn)

    def state_of(self, placed: Any) -> Any:
        """What a body in this process sees as ``ctx.environment``."""
        return self.backend.state_of(placed)

    # ------------------------------------------------------------------ the handle's verbs
    async def open(self, scope: str | None, name: str, config: Any = None) -> EnvironmentStatus:
        """A new instance from ``create(config)``; a previous one is closed first."""
        definition = self._definition(scope, name)
        config = json_config(name, config)
        async with self._exclusive(scope, name) as inst:
            await self._end(inst)
            await self._create(inst, definition, config)
            return inst.status(self.backend.where)

    async def snapshot(self, scope: str | None, name: str) -> tuple[bytes, EnvironmentDefinition]:
        """The state's snapshot between calls, and the definition that restores it."""
        async with self._live(scope, name) as (inst, placed, definition):
            data = await guarded(name, "snapshot", self.backend.snapshot(placed, definition))
            inst.size = len(data)
        self._still(inst)
        return data, definition

    async def run(
        self, scope: str | None, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        """``fn(state, *args)`` where the state lives, in the instance's order."""
        if not callable(fn):
            raise TypeError(f"run() takes a callable (state, *args), not {type(fn).__name__}")
        async with self._live(scope, name) as (inst, placed, _):
            try:
                return await self.backend.run(placed, fn, args)
            except EnvironmentLostError:
                raise
            except Exception:
                self._used(inst, placed, call=False)
                self._still(inst)  # the process died under fn: say that, not fn's error
                raise

    async def fork(self, scope: str | None, name: str, to_scope: str | None) -> EnvironmentStatus:
        """``to_scope``'s instance becomes a copy of this one's state (closing its own)."""
        out = await self.fork_out(scope, name, to_scope)
        live = not isinstance(out.value, bytes)
        return await self.fork_in(to_scope, name, out.definition, out.value, out.iid, live=live)

    async def fork_out(self, scope: str | None, name: str, to_scope: str | None) -> ForkOut:
        """The copy a fork into ``to_scope`` makes, in the source's turn.

        Snapshot bytes (``fork="snapshot"``), else a live instance the backend made.
        """
        if to_scope == scope:
            raise ValueError(f"fork() needs another scope than the instance's own ({scope!r})")
        self._definition(to_scope, name)  # the target must see the environment too
        async with self._live(scope, name) as (inst, placed, source):
            if source.fork is None:
                raise EnvironmentFailedError(
                    f'environment "{name}" is not forkable (its definition says fork=None)'
                )
            iid = new_iid(name)
            if source.fork == "snapshot":
                copy = await guarded(name, "fork", self.backend.snapshot(placed, source))
            else:
                ref = InstanceRef(scope=to_scope, name=name, iid=iid)
                copy = await guarded(name, "fork", self.backend.fork(placed, ref, source))
        self._still(inst)
        return ForkOut(definition=source, value=copy, iid=iid)

    async def fork_in(
        self,
        scope: str | None,
        name: str,
        definition: EnvironmentDefinition,
        copy: Any,
        iid: str,
        *,
        live: bool,
    ) -> EnvironmentStatus:
        """``scope``'s instance becomes ``copy``: a ``live`` instance, else a snapshot's."""
        async with self._exclusive(scope, name) as target:
            await self._end(target)
            target.iid, since = iid, self.clock.now()
            if not live:
                work = self.backend.restore(target.ref(), definition, copy)
                copy = await guarded(name, "restore", work)
            target.opened(definition, copy, self.clock.now())
            self._event("fork", target, since)
            return target.status(self.backend.where)

    async def close(self, scope: str | None, name: str) -> None:
        """Run ``close`` and free the instance (idempotent; a lost one is forgotten)."""
        async with self._exclusive(scope, name) as inst:
            await self._end(inst)

    def status(self, scope: str | None, name: str) -> EnvironmentStatus:
        """The instance as it is now (``"closed"`` when there is none)."""
        inst = self._table.get(scope, name) or Instance(scope, name)
        return inst.status(self.backend.where)

    # ------------------------------------------------------------------ whole scopes
    def scopes(self) -> set[str | None]:
        """The scopes that hold an instance (any state but closed)."""
        return {i.scope for i in self._table.live()}

    async def close_scope(self, scope: str | None) -> int:
        """Close every instance of ``scope`` (its dispose); how many there were."""
        found = self._table.live(scope)
        for inst in found:
            await self.close(scope, inst.name)
        return len(found)

    async def close_idle(self, scope: str | None) -> int:
        """Close ``scope``'s instances that nothing holds; how many were busy."""
        busy = 0
        for inst in self._table.live(scope):
            turn = inst.turns.try_enter()
            busy += turn is None
            if turn is not None:
                try:
                    await self._end(inst)
                finally:
                    inst.turns.leave(turn)
                    self._table.forget_if_idle(inst)
        return busy

    def abandon(self, scope: str | None) -> list[Any]:
        """Mark ``scope``'s instances closed without their ``close``; their live handles."""
        return self._table.abandon(scope)

    def orphan(self, scope: str | None, name: str, why: str) -> None:
        """An instance this runtime's predecessor held, lost with it (``why``)."""
        self._lose(self._table.at(scope, name), why)

    def placed(self, scope: str | None, name: str) -> Any:
        """The live handle of ``scope``'s instance of ``name`` (``None``: not open)."""
        inst = self._table.get(scope, name)
        return inst.placed if inst is not None and inst.state == "open" else None

    async def close_all(self) -> int:
        """Close every instance (the runtime's end); how many there were."""
        closed = 0
        for scope in self.scopes():
            closed += await self.close_scope(scope)
        return closed

    # ------------------------------------------------------------------ parking
    def next_park_at(self) -> float | None:
        """When the next idle instance is due to park (this clock's time), if any is."""
        return self._table.next_park_at()

    async def park_idle(self) -> int:
        """Park every instance idle for its ``park_after_s``; how many were parked."""
        parked = 0
        for inst in self._table.due(self.clock.now()):
            turn = inst.turns.try_enter()
            if turn is not None:  # in use (or awaited): it is not idle
                try:
                    parked += await self._park(inst)
                finally:
                    inst.turns.leave(turn)
        return parked

    async def _park(self, inst: Instance) -> int:
        if inst.state != "open" or inst.definition is None:
            return 0
        since = self.clock.now()
        try:
            parked = await self.backend.park(inst.placed, inst.definition)
        except EnvironmentLostError as err:
            self._lose(inst, str(err))
            return 0
        except Exception:  # a state that does not snapshot is never parked
            inst.unparkable = True
            _log.info("toolray: environment %r cannot be parked", inst.name, exc_info=True)
            return 0
        inst.state, inst.placed, inst.parked, inst.size = "parked", None, parked, parked.size
        self._event("park", inst, since)
        return 1

    def counts(self) -> InstanceCounts:
        """The instances by state, and the lifecycle counters so far."""
        states = [i.state for i in self._table.live()]
        return InstanceCounts(
            open=states.count("open"),
            parked=states.count("parked"),
            lost=states.count("lost"),
            **self._counts,
        )
