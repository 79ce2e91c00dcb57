"""Where instances live: the backend seam, and the in-process backend.

:class:`Instances` keeps the table, the turns and the lifecycle; a backend keeps the states
themselves. In-process (:class:`LocalBackend`) a state is a Python object of this process;
the Ray layer's backend keeps each in a worker (or a process of its own) and answers with
a handle of its own making (``placed``), which the body runner reads to send a call there.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import cloudpickle

from ._definition import EnvironmentDefinition

__all__ = (
    "EnvironmentBackend",
    "InstanceRef",
    "LocalBackend",
    "Parked",
    "invoke",
    "restore_state",
    "snapshot_state",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceRef:
    """One instance's identity: its scope, its environment's name and a serial (``iid``)."""

    scope: str | None
    name: str
    iid: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Parked:
    """A parked instance: where its snapshot waits (the backend's own token) and its size."""

    token: Any
    size: int


@runtime_checkable
class EnvironmentBackend(Protocol):
    """Keeps instances' states where their tools run; every method may raise.

    ``create`` / ``restore`` / ``fork`` return the backend's handle of the new instance
    (``placed``); the other methods take one. A failure of the environment's own code
    raises its error; a backend that lost the instance raises
    :class:`~toolray.errors.EnvironmentLostError`.
    """

    async def create(self, ref: InstanceRef, definition: EnvironmentDefinition, config: Any) -> Any:
        """A new instance from ``definition.create(config)``."""
        ...

    async def restore(self, ref: InstanceRef, definition: EnvironmentDefinition, data: Any) -> Any:
        """A new instance from a snapshot (``bytes``) or a :class:`Parked` of this backend."""
        ...

    async def fork(self, placed: Any, ref: InstanceRef, definition: EnvironmentDefinition) -> Any:
        """A new instance copied from ``placed``'s live state (``"process"`` or a callable)."""
        ...

    async def snapshot(self, placed: Any, definition: EnvironmentDefinition) -> bytes:
        """The state's snapshot (the definition's ``snapshot``, else cloudpickle)."""
        ...

    async def run(self, placed: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(state, *args)`` where the state lives."""
        ...

    async def park(self, placed: Any, definition: EnvironmentDefinition) -> Parked:
        """Snapshot the state, then free it (its ``close`` does not run)."""
        ...

    async def close(self, placed: Any, definition: EnvironmentDefinition) -> None:
        """Run the definition's ``close`` on the state and free it."""
        ...

    async def discard(self, placed: Any) -> None:
        """Free whatever is left of a lost instance (nothing of its code runs)."""
        ...

    def lost(self, placed: Any) -> str | None:
        """Why the instance is gone (its process died, say), or ``None`` while it lives."""
        ...

    def where(self, placed: Any) -> tuple[str | None, int | None]:
        """The node and pid holding the instance (each ``None`` when unknown)."""
        ...

    def state_of(self, placed: Any) -> Any:
        """What a body in this process sees as ``ctx.environment`` (``None``: it runs elsewhere)."""
        ...


async def invoke(fn: Callable[..., Any], *args: Any) -> Any:
    """Call a sync or async function of an environment (a sync one in a thread)."""
    if inspect.iscoroutinefunction(fn):
        return await fn(*args)
    value = await asyncio.to_thread(fn, *args)
    if inspect.isawaitable(value):
        value = await value
    return value


def snapshot_state(definition: EnvironmentDefinition, state: Any) -> bytes:
    """A state's snapshot by its definition (``TypeError`` unless it is ``bytes``)."""
    if definition.snapshot is None:
        return bytes(cloudpickle.dumps(state))
    data = definition.snapshot(state)
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(
            f'environment "{definition.name}": snapshot must return bytes, not '
            f"{type(data).__name__}"
        )
    return bytes(data)


def restore_state(definition: EnvironmentDefinition, data: bytes) -> Any:
    """A state from a snapshot by its definition."""
    if definition.restore is None:
        return cloudpickle.loads(data)
    return definition.restore(data)


@dataclass(eq=False, slots=True)
class _Local:
    state: Any


class LocalBackend:
    """States in this process (the in-process registry's backend)."""

    async def create(self, ref: InstanceRef, definition: EnvironmentDefinition, config: Any) -> Any:
        """Run ``create(config)`` here."""
        return _Local(await invoke(definition.create, config))

    async def restore(self, ref: InstanceRef, definition: EnvironmentDefinition, data: Any) -> Any:
        """Restore a snapshot (or this backend's parked bytes) here."""
        blob = data.token if isinstance(data, Parked) else data
        return _Local(await asyncio.to_thread(restore_state, definition, blob))

    async def fork(self, placed: Any, ref: InstanceRef, definition: EnvironmentDefinition) -> Any:
        """A copy of the state: the definition's callable, else (one process) a snapshot's."""
        how = definition.fork
        if callable(how):
            return _Local(await invoke(how, placed.state))
        data = await self.snapshot(placed, definition)
        return await self.restore(ref, definition, data)

    async def snapshot(self, placed: Any, definition: EnvironmentDefinition) -> bytes:
        """The state's snapshot, taken here."""
        return await asyncio.to_thread(snapshot_state, definition, placed.state)

    async def run(self, placed: Any, fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``fn(state, *args)`` here."""
        return await invoke(fn, placed.state, *args)

    async def park(self, placed: Any, definition: EnvironmentDefinition) -> Parked:
        """Keep the snapshot's bytes; the state goes."""
        data = await self.snapshot(placed, definition)
        placed.state = None
        return Parked(token=data, size=len(data))

    async def close(self, placed: Any, definition: EnvironmentDefinition) -> None:
        """Run ``close(state)``; the state goes."""
        state, placed.state = placed.state, None
        if definition.close is not None:
            await invoke(definition.close, state)

    async def discard(self, placed: Any) -> None:
        """Drop the state."""
        placed.state = None

    def lost(self, placed: Any) -> str | None:
        """An in-process state is never lost (its process is this one)."""
        return None

    def where(self, placed: Any) -> tuple[str | None, int | None]:
        """This process."""
        return None, os.getpid()

    def state_of(self, placed: Any) -> Any:
        """The state itself."""
        return placed.state
