"""``RegistryActor``: the authoritative registry of a namespace.

It validates every write by applying it to its own core ``ToolRegistry`` (so errors and
messages are the core's), records the contribution as an :class:`Op`, persists the op list
in Ray's internal KV (a restarted actor replays it), and returns only after every executor
actor has applied the change to its mirror — a call that starts after a write returns sees
it (DESIGN.md §2). Writes are serialized, so executors receive changes in sequence order.
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from dataclasses import replace
from typing import Any

from toolray import ToolRegistry
from toolray.lowlevel import has_scope, scope_parent

from ._errors import is_actor_death
from ._handles import get_named
from ._mirror import Mirror, Op

__all__ = ("RegistryActor",)

_log = logging.getLogger("toolray")


def _kv() -> tuple[Any, Any]:
    from ray.experimental import internal_kv

    return internal_kv._internal_kv_get, internal_kv._internal_kv_put


_FANOUT_TIMEOUT_S = 30.0


def _as_future(ref: Any) -> Any:
    return asyncio.wrap_future(ref.future())


class RegistryActor:
    """Holds the namespace's registry state and fans changes out to executor actors."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.mirror = Mirror(ToolRegistry())
        self.ops: dict[int, Op] = {}
        self.next_id = 1
        self.seq = 0
        self.executors: dict[str, Any] = {}
        self.restarts = 0
        self._lock = asyncio.Lock()
        self._restore()

    # ------------------------------------------------------------------ persistence
    @property
    def _kv_key(self) -> bytes:
        return f"toolray:{self.namespace}:registry".encode()

    def _persist(self) -> None:
        state = {
            "ops": list(self.ops.values()),
            "next_id": self.next_id,
            "seq": self.seq,
            "executors": list(self.executors),
            "restarts": self.restarts,
        }
        _kv()[1](self._kv_key, pickle.dumps(state), overwrite=True)

    def _restore(self) -> None:
        raw = _kv()[0](self._kv_key)
        if not raw:
            return
        state = pickle.loads(raw)
        for op in state["ops"]:
            try:
                self.mirror.apply(op)
                self.ops[op.id] = op
            except Exception:
                _log.exception("toolray: could not restore contribution %s", op.id)
        self.next_id = state["next_id"]
        self.seq = state["seq"] + 1  # executors resync on the gap
        self.restarts = state.get("restarts", 0) + 1
        for name in state["executors"]:
            handle = get_named(name, self.namespace)
            if handle is not None:
                self.executors[name] = handle
        self._persist()

    # ------------------------------------------------------------------ fan-out
    async def _publish(self, delta: tuple[Any, ...]) -> None:
        self.seq += 1
        self._persist()
        names = list(self.executors)
        refs = [self.executors[n].invalidate.remote(self.seq, delta) for n in names]
        outcomes = await asyncio.gather(
            *(asyncio.wait_for(_as_future(ref), _FANOUT_TIMEOUT_S) for ref in refs),
            return_exceptions=True,
        )
        for name, outcome in zip(names, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if is_actor_death(outcome):
                    self.executors.pop(name, None)
                else:  # a slow executor resyncs on the next sequence gap
                    _log.warning("toolray: executor %s missed an invalidation: %r", name, outcome)

    # ------------------------------------------------------------------ writes
    async def apply(self, op: Op) -> int:
        """Validate and record one contribution; returns its id."""
        async with self._lock:
            op = replace(op, id=self.next_id)
            self.mirror.apply(op)  # raises the core's error, leaving nothing behind
            self.next_id += 1
            self.ops[op.id] = op
            await self._publish(("add", op))
            return op.id

    async def ensure_scope(self, key: str, parent: str | None) -> None:
        """Create a scope (and its chain) if new; a conflicting parent raises ValueError."""
        async with self._lock:
            reg = self.mirror.registry
            known = has_scope(reg, key)
            reg.scope(key, parent=parent)
            if known:
                return
            op = Op(id=self.next_id, kind="scope", key=key, parent=scope_parent(reg, key))
            self.next_id += 1
            self.ops[op.id] = op
            await self._publish(("add", op))

    async def dispose(self, op_id: int) -> bool:
        """Lift one contribution; ``False`` if it was already gone."""
        async with self._lock:
            return await self._dispose(op_id)

    async def _dispose(self, op_id: int) -> bool:
        if self.ops.pop(op_id, None) is None:
            return False
        self.mirror.remove(op_id)
        await self._publish(("remove", op_id))
        return True

    async def dispose_scope(self, key: str) -> int:
        """Lift everything contributed through ``key``, last first."""
        async with self._lock:
            owned = [i for i, op in self.ops.items() if op.key == key and op.kind != "scope"]
            for op_id in reversed(owned):
                await self._dispose(op_id)
            return len(owned)

    # ------------------------------------------------------------------ executors
    async def attach_executor(self, name: str) -> tuple[int, list[Op]]:
        """Register an executor for invalidations; returns the full state to mirror."""
        async with self._lock:
            handle = get_named(name, self.namespace)
            if handle is not None:
                self.executors[name] = handle
                self._persist()
            return self.seq, list(self.ops.values())

    async def detach_executor(self, name: str) -> None:
        """Stop sending invalidations to ``name``."""
        async with self._lock:
            self.executors.pop(name, None)
            self._persist()

    async def snapshot(self) -> tuple[int, list[Op]]:
        """The sequence number and every live contribution, in order.

        Lock-free on purpose: an executor resyncing inside ``invalidate`` calls it while a
        write holds the lock and awaits that very executor.
        """
        return self.seq, list(self.ops.values())

    # ------------------------------------------------------------------ reads
    async def schemas(self, scope: str | None) -> list[dict[str, Any]]:
        """``schemas(scope)`` of the authoritative registry."""
        return self.mirror.registry.schemas(scope)

    async def definition_blob(self, name: str, scope: str | None) -> bytes | None:
        """The pickled definition ``scope`` sees under ``name``."""
        definition = self.mirror.registry.get(name, scope)
        if definition is None:
            return None
        found = self.mirror.key_of(definition)
        return found[1] if found is not None else None

    async def names(self, scope: str | None) -> list[str]:
        """Visible capability names, in view order."""
        return [d.name for d in self.mirror.registry.definitions(scope)]

    async def known_names(self, scope: str | None) -> list[str]:
        """R-SCH-11 known names for the scope."""
        return self.mirror.registry.known_names(scope)

    async def info(self) -> dict[str, Any]:
        """Counters: contributions, sequence, executors, restarts."""
        return {
            "contributions": len(self.ops),
            "seq": self.seq,
            "executors": sorted(self.executors),
            "restarts": self.restarts,
        }

    async def ping(self) -> bool:
        """Liveness."""
        return True
