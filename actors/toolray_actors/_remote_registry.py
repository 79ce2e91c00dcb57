"""Driver-side facades of the registry actor: the remote registry and remote scopes.

Writes are synchronous (they return once every executor has the change, DESIGN.md §2) and
return ordinary :class:`toolray.Disposer` objects. Definitions, hooks and guards travel as
cloudpickle blobs; one that cannot be pickled fails at once with a ``TypeError`` naming it.
Registration is idempotent across drivers: an identical definition under a live name just
adds a holder (see ``_fingerprint``); a different one needs ``replace=True``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle

from toolray import (
    Disposer,
    ToolBatchInput,
    ToolBatchResult,
    ToolDefinition,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolPromptSection,
)

from ._connection import Connection
from ._fingerprint import fingerprint
from ._mirror import Op, dumps_named

__all__ = ("RemoteRegistry", "RemoteScope")


class _RemoteWriter:
    """The write API of one context, executed by the registry actor."""

    def __init__(self, conn: Connection, key: str | None) -> None:
        self._conn = conn
        self._key = key

    def _check(self) -> None:
        """Raise if this context can no longer be written to."""

    def _apply(self, op: Op) -> Disposer:
        self._check()
        op_id = self._conn.call("apply", op)
        conn = self._conn
        return Disposer(lambda: conn.call("dispose", op_id))

    def register(
        self,
        definition: ToolDefinition,
        *,
        when: Callable[..., Any] | None = None,
        replace: bool = False,
    ) -> Disposer:
        """Register a tool (pickled; the actor validates it).

        Registering an identical definition again adds a holder (it stays until every
        disposer ran); a different definition under a taken name needs ``replace=True``.
        """
        if not isinstance(definition, ToolDefinition):
            raise TypeError(f"register() takes a ToolDefinition, not {type(definition).__name__}")
        name = definition.name
        blob = dumps_named(definition, f'tool "{name}"')
        when_blob = dumps_named(when, f'the when condition of tool "{name}"') if when else None
        digest = fingerprint(definition) + (fingerprint(when) if when is not None else "")
        return self._apply(
            Op(
                id=0,
                kind="register",
                key=self._key,
                blob=blob,
                when=when_blob,
                name=name,
                fingerprint=digest,
                replace=bool(replace),
            )
        )

    def restrict(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Mask inherited tools for this scope."""
        as_tuple = lambda v: tuple(v) if v is not None and not isinstance(v, str) else v  # noqa: E731
        return self._apply(
            Op(id=0, kind="restrict", key=self._key, allow=as_tuple(allow), deny=as_tuple(deny))
        )

    def guard(self, fn: Callable[[Any], str | None]) -> Disposer:
        """A monotonic guard (runs in the executor actors)."""
        return self._apply(Op(id=0, kind="guard", key=self._key, blob=dumps_named(fn, "guard")))

    def present_as(self, mode: str) -> Disposer:
        """This scope's presentation mode."""
        return self._apply(Op(id=0, kind="present_as", key=self._key, mode=mode))

    def _hook(self, hook: str, fn: Callable[..., Any], prepend: bool = False) -> Disposer:
        blob = dumps_named(fn, f"the {hook} hook")
        return self._apply(
            Op(id=0, kind="hook", key=self._key, blob=blob, hook=hook, prepend=prepend)
        )

    def on_pre_execute(self, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Pre-execute waterfall listener (runs in the executor actors)."""
        return self._hook("pre_execute", listener, prepend)

    def on_execute(self, wrapper: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Around-dispatch wrapper (runs in the executor actors)."""
        return self._hook("execute", wrapper, prepend)

    def on_post_execute(self, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Post-execute listener (runs in the executor actors)."""
        return self._hook("post_execute", listener, prepend)

    def on_result(self, observer: Callable[..., Any]) -> Disposer:
        """Result observer (runs in the executor actors)."""
        return self._hook("result", observer)

    def on_dispatch_log(self, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Code Mode sub-call log waterfall (runs in the executor actors)."""
        return self._hook("dispatch_log", listener, prepend)

    def on_change(self, listener: Callable[[], Any]) -> Disposer:
        """Not available remotely yet: a change listener runs inside the registry.

        Poll ``rt.registry.info()["seq"]`` (it grows with every change) instead.
        """
        raise NotImplementedError(
            "on_change() listeners run synchronously inside the registry and cannot live in "
            "a driver; poll rt.registry.info()['seq'] instead"
        )

    def set_executor(self, executor: Any) -> Disposer:
        """Not available remotely: on Ray, each scope's executor is its executor actor."""
        raise NotImplementedError(
            "set_executor() selects an in-process executor; on Ray every scope runs on its "
            "own executor actor (rt.executor(scope))"
        )


class RemoteScope(_RemoteWriter):
    """The scoped context of one agent scope, held by the registry actor."""

    def __init__(self, conn: Connection, key: str, parent: str | None) -> None:
        super().__init__(conn, key)
        self.key = key
        self.parent = parent
        self._disposed = False

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has run (through this object)."""
        return self._disposed

    def _check(self) -> None:
        if self._disposed:
            raise RuntimeError(f'scope "{self.key}" is disposed')

    def dispose(self) -> None:
        """Unwind everything registered through this scope and forget the scope."""
        if self._disposed:
            return
        self._disposed = True
        self._conn.call("dispose_scope", self.key)

    def __repr__(self) -> str:
        return f"<RemoteScope {self.key!r} parent={self.parent!r}>"


class RemoteRegistry(_RemoteWriter):
    """The global context and the read side of the namespace's registry actor."""

    def __init__(self, conn: Connection, executors: Callable[[str | None], Any]) -> None:
        super().__init__(conn, None)
        self._executors = executors

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch`` on its scope's executor actor (``rt.executor(batch.scope)``)."""
        return await self._executors(batch.scope).execute_batch(batch)  # type: ignore[no-any-return]

    async def execute(self, inp: ToolExecutionInput) -> ToolExecutionResult:
        """Run one call through its scope's executor actor."""
        return await self._executors(inp.scope).execute(inp)  # type: ignore[no-any-return]

    def set_approval(self, service: Any) -> Disposer:
        """Mount the approval service in every executor actor (it must be picklable)."""
        blob = dumps_named(service, "the approval service")
        return self._apply(Op(id=0, kind="approval", key=None, blob=blob))

    def scope(self, key: str, *, parent: str | None = None) -> RemoteScope:
        """The remote scoped context (created on first use)."""
        if not isinstance(key, str):
            raise TypeError("a scope key is a str")
        self._conn.call("ensure_scope", key, parent)
        return RemoteScope(self._conn, key, parent)

    def schemas(self, scope: str | None = None) -> list[dict[str, Any]]:
        """Model-facing schemas as ``scope`` sees them."""
        return list(self._conn.call("schemas", scope))

    def names(self, scope: str | None = None) -> list[str]:
        """Visible capability names, in view order."""
        return list(self._conn.call("names", scope))

    def get(self, name: str, scope: str | None = None) -> ToolDefinition | None:
        """The definition ``scope`` sees (unpickled here)."""
        blob = self._conn.call("definition_blob", name, scope)
        return cloudpickle.loads(blob) if blob is not None else None

    def definitions(self, scope: str | None = None) -> list[ToolDefinition]:
        """The visible capability definitions (unpickled here), in view order."""
        return [d for d in (self.get(n, scope) for n in self.names(scope)) if d is not None]

    def known_names(self, scope: str | None = None) -> list[str]:
        """R-SCH-11 known names for the scope."""
        return list(self._conn.call("known_names", scope))

    def prompt_sections(self, scope: str | None = None) -> list[ToolPromptSection]:
        """Code Mode's system-prompt sections for ``scope`` (``ToolRegistry.prompt_sections``).

        The SDK follows the config's ``[code]`` table (a Python runtime and its imports).
        """
        return list(self._conn.call("prompt_sections", scope))

    def info(self) -> dict[str, Any]:
        """Registry counters (contributions, sequence, executors, restarts, leases, scopes)."""
        return dict(self._conn.call("info"))
