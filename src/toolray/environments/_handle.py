"""``EnvironmentHandle``: one scope's instance of one environment, as a caller holds it.

The same handle serves every backend: an in-process registry's instances
(:class:`LocalService`) and a Ray executor actor's (the Ray layer's own service). Every
verb has a ``*_sync`` twin that works in scripts and in notebooks (a running loop).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, final

from ._backend import restore_state
from ._definition import EnvironmentStatus
from ._instances import Instances

__all__ = ("EnvironmentHandle", "EnvironmentService", "LocalService")

_T = TypeVar("_T")
Blocking = Callable[[Coroutine[Any, Any, Any]], Any]


class EnvironmentService(Protocol):
    """What a handle asks of the runtime that keeps the instances."""

    async def open(self, scope: str | None, name: str, config: Any) -> EnvironmentStatus:
        """Open a new instance (closing the previous one)."""
        ...

    async def snapshot(self, scope: str | None, name: str) -> Any:
        """A copy of the state, restored in the caller's process."""
        ...

    async def run(
        self, scope: str | None, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        """``fn(state, *args)`` where the state lives."""
        ...

    async def fork(self, scope: str | None, name: str, to_scope: str | None) -> EnvironmentStatus:
        """``to_scope``'s instance becomes a copy of this one."""
        ...

    async def close(self, scope: str | None, name: str) -> None:
        """Close the instance."""
        ...

    async def status(self, scope: str | None, name: str) -> EnvironmentStatus:
        """The instance as it is now."""
        ...


class LocalService:
    """The service of an in-process registry's :class:`Instances`."""

    def __init__(self, instances: Instances) -> None:
        self._instances = instances

    async def open(self, scope: str | None, name: str, config: Any) -> EnvironmentStatus:
        """Open through the instances."""
        return await self._instances.open(scope, name, config)

    async def snapshot(self, scope: str | None, name: str) -> Any:
        """Snapshot where the state lives, restore here."""
        data, definition = await self._instances.snapshot(scope, name)
        return restore_state(definition, data)

    async def run(
        self, scope: str | None, name: str, fn: Callable[..., Any], args: tuple[Any, ...]
    ) -> Any:
        """Run through the instances."""
        return await self._instances.run(scope, name, fn, args)

    async def fork(self, scope: str | None, name: str, to_scope: str | None) -> EnvironmentStatus:
        """Fork through the instances."""
        return await self._instances.fork(scope, name, to_scope)

    async def close(self, scope: str | None, name: str) -> None:
        """Close through the instances."""
        await self._instances.close(scope, name)

    async def status(self, scope: str | None, name: str) -> EnvironmentStatus:
        """The instances' status."""
        return self._instances.status(scope, name)


@final
class EnvironmentHandle:
    """One scope's instance of one environment: open, snapshot, run, fork, close, status.

    Example:
        >>> from toolray import ToolRegistry, define_environment
        >>> registry = ToolRegistry()
        >>> _ = registry.register_environment(
        ...     define_environment("counter", create=lambda config: {"n": config["start"]})
        ... )
        >>> h = registry.environment("counter", scope="agent-1")
        >>> h.open_sync({"start": 3}).state
        'open'
        >>> h.run_sync(lambda state: state["n"])
        3
        >>> h.close_sync()
    """

    __slots__ = ("_blocking", "_name", "_scope", "_service")

    def __init__(
        self, service: EnvironmentService, name: str, scope: str | None, blocking: Blocking
    ) -> None:
        if not isinstance(name, str) or not name:
            raise TypeError(f"an environment's name is a non-empty str, not {name!r}")
        if scope is not None and not isinstance(scope, str):
            raise TypeError(f"a scope key is a str or None, not {type(scope).__name__}")
        self._service = service
        self._name = name
        self._scope = scope
        self._blocking = blocking

    @property
    def name(self) -> str:
        """The environment's name."""
        return self._name

    @property
    def scope(self) -> str | None:
        """The scope whose instance this is."""
        return self._scope

    async def open(self, config: Any = None) -> EnvironmentStatus:
        """A new instance from ``create(config)`` (a previous one is closed first).

        Returns when ``create`` has returned. ``create`` raising raises
        ``EnvironmentFailedError`` with its message, and nothing is left open.
        """
        return await self._service.open(self._scope, self._name, config)

    async def snapshot(self) -> Any:
        """A copy of the state as it is between calls (``restore(snapshot(S))`` here)."""
        return await self._service.snapshot(self._scope, self._name)

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(state, *args)`` where the state lives, in the instance's order like a call."""
        value: _T = await self._service.run(self._scope, self._name, fn, args)
        return value

    async def fork(self, to_scope: str) -> EnvironmentHandle:
        """Open this environment in ``to_scope`` with a copy of this state; its handle."""
        if not isinstance(to_scope, str):
            raise TypeError(f"fork() takes a scope key (str), not {type(to_scope).__name__}")
        await self._service.fork(self._scope, self._name, to_scope)
        return EnvironmentHandle(self._service, self._name, to_scope, self._blocking)

    async def close(self) -> None:
        """Run ``close`` and free the instance (idempotent)."""
        await self._service.close(self._scope, self._name)

    async def status(self) -> EnvironmentStatus:
        """The instance as it is now (``state`` ``"closed"`` when there is none)."""
        return await self._service.status(self._scope, self._name)

    def open_sync(self, config: Any = None) -> EnvironmentStatus:
        """:meth:`open` from blocking code."""
        status: EnvironmentStatus = self._blocking(self.open(config))
        return status

    def snapshot_sync(self) -> Any:
        """:meth:`snapshot` from blocking code."""
        return self._blocking(self.snapshot())

    def run_sync(self, fn: Callable[..., _T], *args: Any) -> _T:
        """:meth:`run` from blocking code."""
        value: _T = self._blocking(self.run(fn, *args))
        return value

    def fork_sync(self, to_scope: str) -> EnvironmentHandle:
        """:meth:`fork` from blocking code."""
        handle: EnvironmentHandle = self._blocking(self.fork(to_scope))
        return handle

    def close_sync(self) -> None:
        """:meth:`close` from blocking code."""
        self._blocking(self.close())

    def status_sync(self) -> EnvironmentStatus:
        """:meth:`status` from blocking code."""
        status: EnvironmentStatus = self._blocking(self.status())
        return status

    def __repr__(self) -> str:
        return f"<EnvironmentHandle {self._name!r} scope={self._scope!r}>"
