"""The driver's side of environments: a handle's verbs, asked of the executor actors.

Each scope's instances belong to the executor actor serving that scope; a handle's verb is
one request to it (``ExecutorActor.environment``). ``snapshot`` restores the bytes here,
in the caller's process (``restore(snapshot(S))``); ``run`` ships the function pickled and
unpickles its value here (no toolray process in between unpickles either); ``fork`` asks
the source's executor for a copy and the target's to adopt it. An idle executor that is
exiting refuses a request (it holds no instance, and starts nothing more): the request is
asked again, of the scope's next executor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, TypeVar

import cloudpickle

from toolray import EnvironmentDefinition, EnvironmentStatus, ExecutorUnavailableError
from toolray.lowlevel import restore_state
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
from toolray_actors._errors import ExecutorRetiringError
from toolray_actors._mirror import dumps_named


class _Executor(Protocol):
    """The executor actor serving a scope, as a handle asks it (an ``ExecutorHandle``)."""

    name: str
    """The actor's name (a shard serves many scopes under one)."""

    async def environment_request(self, request: EnvRequest) -> object:
        """One request to the actor."""
        ...


__all__ = ("RemoteEnvironments",)

_T = TypeVar("_T")
_Status = EnvironmentStatus
_RETIRING_PAUSES = (0.05, 0.1, 0.2, 0.4) + (0.5,) * 8
"""While an idle executor exits (within about 2 s of refusing), a request waits for the next."""


class RemoteEnvironments:
    """The ``EnvironmentService`` of a Ray runtime: requests to scopes' executor actors."""

    def __init__(self, executors: Callable[[str | None], _Executor]) -> None:
        self._executors = executors
        self._definitions: dict[str, EnvironmentDefinition] = {}

    async def _request(self, scope: str | None, request: EnvRequest) -> object:
        """``request`` of ``scope``'s executor; asked again while an exiting one refuses it."""
        pauses = iter(_RETIRING_PAUSES)
        while True:
            try:
                return await self._executors(scope).environment_request(request)
            except ExecutorRetiringError as err:  # it started nothing: its successor will
                pause = next(pauses, None)
                if pause is None:
                    raise ExecutorUnavailableError(f"{err} kept exiting") from None
            await asyncio.sleep(pause)

    async def _ask(self, scope: str | None, request: EnvRequest, kind: type[_T]) -> _T:
        answer = await self._request(scope, request)
        assert isinstance(answer, kind), answer
        return answer

    async def open(self, scope: str | None, name: str, config: object) -> EnvironmentStatus:
        """Open ``scope``'s instance with ``config`` (closing its previous one)."""
        return await self._ask(scope, EnvOpen(scope=scope, name=name, config=config), _Status)

    async def snapshot(self, scope: str | None, name: str) -> object:
        """The state's copy, restored in this process."""
        reply = await self._ask(scope, EnvSnapshot(scope=scope, name=name), SnapshotReply)
        definition = self._definitions.get(reply.key)
        if definition is None:
            definition = self._definitions[reply.key] = cloudpickle.loads(reply.blob)
        return restore_state(definition, reply.data)

    async def run(
        self, scope: str | None, name: str, fn: Callable[..., object], args: tuple[object, ...]
    ) -> object:
        """``fn(state, *args)`` where the state lives; its value, unpickled here."""
        if not callable(fn):
            raise TypeError(f"run() takes a callable (state, *args), not {type(fn).__name__}")
        data = dumps_named((fn, args), "run()'s function and arguments")
        out = await self._ask(scope, EnvRun(scope=scope, name=name, data=data), bytes)
        return cloudpickle.loads(out)

    async def fork(self, scope: str | None, name: str, to_scope: str | None) -> EnvironmentStatus:
        """The source's executor makes the copy, the target's adopts it.

        When one actor serves both scopes (a shard, say), it is one request.
        """
        if to_scope == scope:
            raise ValueError(f"fork() needs another scope than the instance's own ({scope!r})")
        if self._executors(scope).name == self._executors(to_scope).name:
            here = EnvForkHere(scope=scope, name=name, to_scope=to_scope)
            return await self._ask(scope, here, _Status)
        out = EnvForkOut(scope=scope, name=name, to_scope=to_scope)
        copy = await self._ask(scope, out, ForkCopy)
        return await self._ask(to_scope, EnvForkIn(scope=to_scope, name=name, copy=copy), _Status)

    async def close(self, scope: str | None, name: str) -> None:
        """Close ``scope``'s instance."""
        await self._request(scope, EnvClose(scope=scope, name=name))

    async def status(self, scope: str | None, name: str) -> EnvironmentStatus:
        """``scope``'s instance as it is now."""
        return await self._ask(scope, EnvStatusOf(scope=scope, name=name), _Status)
