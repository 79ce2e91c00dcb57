"""A worker's environment instances with ``isolation="shared"``: states in its own memory.

Every call of an instance runs on this worker (its executor sends them here), as a task or
a thread of the worker like any shared-isolation body, with the state as
``ctx.environment``. A fork copies by snapshot (a worker cannot copy itself) or by the
definition's callable. The blast radius is the worker's: a body that crashes it loses
every instance it holds, which their executors then report ``ENVIRONMENT_LOST``.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass

import cloudpickle

from toolray import EnvironmentDefinition, EnvironmentLostError
from toolray.lowlevel import invoke, restore_state, snapshot_state

__all__ = ("SharedInstances",)


@dataclass(eq=False, slots=True)
class _State:
    definition: EnvironmentDefinition
    state: object


class SharedInstances:
    """The instances one shared-isolation worker holds in its memory."""

    def __init__(self) -> None:
        self._states: dict[str, _State] = {}
        self._definitions: dict[str, EnvironmentDefinition] = {}
        self.opened = 0
        self.lost = 0

    def __len__(self) -> int:
        return len(self._states)

    def state_of(self, iid: object) -> object:
        """The live state a body of instance ``iid`` sees (``EnvironmentLostError`` if gone)."""
        found = self._states.get(str(iid))
        if found is None:
            raise EnvironmentLostError("the worker holds no such instance (it was lost)")
        return found.state

    def has(self, iid: str) -> bool:
        """Whether the worker holds ``iid``."""
        return iid in self._states

    def _definition(self, key: str, blob: bytes) -> EnvironmentDefinition:
        found = self._definitions.get(key)
        if found is None:
            found = cloudpickle.loads(blob)
            if not isinstance(found, EnvironmentDefinition):
                raise TypeError(f"{key!r} is not an environment's definition")
            self._definitions[key] = found
        return found

    async def open(
        self, iid: str, key: str, blob: bytes, config: object, snapshot: bytes | None
    ) -> int:
        """``create(config)`` (or a restore) here; this worker's pid."""
        definition = self._definition(key, blob)
        if snapshot is None:
            state = await invoke(definition.create, config)
        else:
            state = await asyncio.to_thread(restore_state, definition, snapshot)
        self._states[iid] = _State(definition, state)
        self.opened += 1
        return os.getpid()

    def _held(self, iid: str) -> _State:
        found = self._states.get(iid)
        if found is None:
            raise EnvironmentLostError("the worker holds no such instance (it was lost)")
        return found

    async def operate(self, iid: str, op: str, data: bytes | None = None) -> bytes | None:
        """``snapshot``, ``run`` (``data``: pickled ``(fn, args)``), ``park`` or ``close``."""
        held = self._held(iid)
        if op in ("snapshot", "park"):
            snapshot = await asyncio.to_thread(snapshot_state, held.definition, held.state)
            if op == "park":
                del self._states[iid]
            return snapshot
        if op == "run":
            fn, args = cloudpickle.loads(data or b"")
            return bytes(cloudpickle.dumps(await invoke(fn, held.state, *args)))
        if op == "close":
            del self._states[iid]
            if held.definition.close is not None:
                await invoke(held.definition.close, held.state)
            return None
        raise ValueError(f"unknown operation {op!r}")

    async def fork(self, iid: str, new_iid: str, how: str) -> int:
        """A copy as ``new_iid``: the definition's callable, else through a snapshot."""
        held = self._held(iid)
        definition = held.definition
        if callable(definition.fork) and how != "process":
            copy = await invoke(definition.fork, held.state)
        else:
            snapshot = await asyncio.to_thread(snapshot_state, definition, held.state)
            copy = await asyncio.to_thread(restore_state, definition, snapshot)
        self._states[new_iid] = _State(definition, copy)
        self.opened += 1
        return os.getpid()

    async def discard(self, iid: str) -> None:
        """Drop what is left of an instance."""
        self._states.pop(iid, None)

    def close(self) -> None:
        """Drop every state (the worker is shutting down; nothing of their code runs)."""
        self._states.clear()
