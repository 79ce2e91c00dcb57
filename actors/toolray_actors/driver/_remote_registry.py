"""Driver-side facades of the registry actor: the remote registry and remote scopes.

Writes are synchronous (they return once every executor has the change) and
return ordinary :class:`toolray.Disposer` objects. Definitions, hooks, guards and
executors travel as cloudpickle blobs; one that cannot be pickled fails at once with a
``TypeError`` naming it. Registration is idempotent across drivers: an identical
definition under a live name just adds a holder (see ``_fingerprint``); a different one
needs ``replace=True``. ``on_change`` listeners run in this driver (``_change_feed``);
``set_executor`` ships a picklable ``ToolExecutor`` that runs inside the executor actors.
The read side is a :class:`~toolray_actors.driver._remote_reads.RemoteReads` the registry holds.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Coroutine, Iterable
from typing import Any, Concatenate, ParamSpec, TypeVar

from toolray import (
    ActivationContext,
    Disposer,
    EnvironmentDefinition,
    EnvironmentHandle,
    RegistryStatistics,
    ToolBatchInput,
    ToolBatchResult,
    ToolDefinition,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolPromptSection,
)
from toolray.lowlevel import not_a_definition
from toolray_actors._fingerprint import fingerprint
from toolray_actors._mirror import Op, dumps_named
from toolray_actors._toolset import RemoteToolSet
from toolray_actors.control._registry_actor import RegistryActor
from toolray_actors.control._store import RegistryInfo

from ._change_feed import ChangeFeed
from ._connection import Connection
from ._env_service import RemoteEnvironments
from ._executor_handle import ExecutorHandle
from ._remote_reads import RemoteReads

__all__ = ("RemoteRegistry", "RemoteScope")

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _names(value: Any) -> Any:
    """A name list as it travels (a bare ``str`` stays as it is: the core rejects it)."""
    return tuple(value) if value is not None and not isinstance(value, str | bytes) else value


class _RemoteWriter:
    """The write API of one context, executed by the registry actor."""

    def __init__(self, conn: Connection, key: str | None, feed: ChangeFeed) -> None:
        self._conn = conn
        self._key = key
        self._feed = feed

    def _check(self) -> None:
        """Raise if this context can no longer be written to."""

    def _call(
        self,
        method: Callable[Concatenate[RegistryActor, _P], Coroutine[object, object, _R]],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> _R:
        """A write: returns once the change reached every executor and this driver's listeners."""
        out = self._conn.call(method, *args, **kwargs)
        self._feed.wait_delivered()
        return out

    def _apply(self, op: Op) -> Disposer:
        self._check()
        op_id = self._call(RegistryActor.apply, op)
        return Disposer(lambda: self._call(RegistryActor.dispose, op_id))

    def register(
        self,
        definition: ToolDefinition,
        *,
        when: Callable[..., object] | None = None,
        replace: bool = False,
    ) -> Disposer:
        """Register a tool (pickled; the actor validates it).

        Registering an identical definition again adds a holder (it stays until every
        disposer ran); a different definition under a taken name needs ``replace=True``.
        """
        if not isinstance(definition, ToolDefinition):
            raise not_a_definition(definition)
        name = definition.name
        if when is not None and not callable(when):
            raise TypeError(f'tool "{name}" when must be callable')
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

    def register_environment(self, definition: EnvironmentDefinition) -> Disposer:
        """Register an environment (pickled; identical registrations add a holder)."""
        if not isinstance(definition, EnvironmentDefinition):
            raise TypeError(
                "register_environment() takes an EnvironmentDefinition (from "
                f"define_environment), not {type(definition).__name__}"
            )
        name = definition.name
        blob = dumps_named(definition, f'environment "{name}"')
        digest = fingerprint(definition)
        return self._apply(
            Op(id=0, kind="environment", key=self._key, blob=blob, name=name, fingerprint=digest)
        )

    def restrict(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Mask inherited tools for this scope."""
        op = Op(id=0, kind="restrict", key=self._key, allow=_names(allow), deny=_names(deny))
        return self._apply(op)

    def guard(self, fn: Callable[[ToolExecution], str | None]) -> Disposer:
        """A monotonic guard (runs in the executor actors)."""
        if not callable(fn):
            raise TypeError("guard() takes a callable")
        return self._apply(Op(id=0, kind="guard", key=self._key, blob=dumps_named(fn, "guard")))

    def present_as(self, mode: str) -> Disposer:
        """This scope's presentation mode."""
        return self._apply(Op(id=0, kind="present_as", key=self._key, mode=mode))

    def _hook(self, hook: str, fn: Callable[..., object], prepend: bool = False) -> Disposer:
        if not callable(fn):
            kind = {"pre_execute": "pre", "post_execute": "post"}.get(hook, hook)
            raise TypeError(f"a {kind} hook must be callable")  # the core's text
        blob = dumps_named(fn, f"the {hook} hook")
        return self._apply(
            Op(id=0, kind="hook", key=self._key, blob=blob, hook=hook, prepend=prepend)
        )

    def on_pre_execute(self, listener: Callable[..., object], *, prepend: bool = False) -> Disposer:
        """Pre-execute waterfall listener (runs in the executor actors)."""
        return self._hook("pre_execute", listener, prepend)

    def on_execute(self, wrapper: Callable[..., object], *, prepend: bool = False) -> Disposer:
        """Around-dispatch wrapper (runs in the executor actors)."""
        return self._hook("execute", wrapper, prepend)

    def on_post_execute(
        self, listener: Callable[..., object], *, prepend: bool = False
    ) -> Disposer:
        """Post-execute listener (runs in the executor actors)."""
        return self._hook("post_execute", listener, prepend)

    def on_result(self, observer: Callable[..., object]) -> Disposer:
        """Result observer (runs in the executor actors)."""
        return self._hook("result", observer)

    def on_dispatch_log(
        self, listener: Callable[..., object], *, prepend: bool = False
    ) -> Disposer:
        """Code Mode sub-call log waterfall (runs in the executor actors)."""
        return self._hook("dispatch_log", listener, prepend)

    def on_change(self, listener: Callable[[], object]) -> Disposer:
        """``() -> None`` in this driver after every committed change, never scope-filtered.

        It runs on the runtime's loop thread; a change made through this driver is
        delivered before the write returns, others' within a poll (see ``_change_feed``).
        """
        self._check()
        return self._feed.add(listener)

    def set_executor(self, executor: object) -> Disposer:
        """The batch executor for this context (global = the deployment default).

        ``executor`` is a picklable ``ToolExecutor``; it runs inside the executor actor
        serving each batch, as in-process it runs in the registry's process.
        """
        if not callable(getattr(executor, "execute", None)):
            raise TypeError(
                f"set_executor() takes a ToolExecutor (an object with an async "
                f"execute(batch)), not {type(executor).__name__}"
            )
        blob = dumps_named(executor, "the executor")
        return self._apply(Op(id=0, kind="executor", key=self._key, blob=blob))


class RemoteScope(_RemoteWriter):
    """The scoped context of one agent scope, held by the registry actor."""

    def __init__(
        self,
        conn: Connection,
        key: str,
        feed: ChangeFeed,
        forget: Callable[[str], None],
    ) -> None:
        super().__init__(conn, key, feed)
        self.key = key
        self._parent: str | None = None
        self._disposed = False
        self._forget = forget
        self._listeners: list[Disposer] = []

    @property
    def parent(self) -> str | None:
        """The parent scope key, if any (``None`` once disposed, as in the core)."""
        return None if self._disposed else self._parent

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has run."""
        return self._disposed

    def _check(self) -> None:
        if self._disposed:
            raise RuntimeError(f'scope "{self.key}" is disposed')

    def on_change(self, listener: Callable[[], object]) -> Disposer:
        """``() -> None`` after every committed change (owned by this scope: see dispose)."""
        disposer = super().on_change(listener)
        self._listeners.append(disposer)
        return disposer

    def dispose(self) -> None:
        """Unwind everything registered through this scope and forget the scope."""
        if self._disposed:
            return
        self._disposed = True
        while self._listeners:
            self._listeners.pop()()
        self._forget(self.key)
        self._call(RegistryActor.dispose_scope, self.key)

    def __repr__(self) -> str:
        return f"<RemoteScope {self.key!r} parent={self.parent!r}>"


class RemoteRegistry(_RemoteWriter):
    """The global context and the read side of the namespace's registry actor.

    Writes are its own (as a scope's); reads and calls go to the :class:`RemoteReads` it
    holds.
    """

    def __init__(self, conn: Connection, executors: Callable[[str | None], ExecutorHandle]) -> None:
        super().__init__(conn, None, ChangeFeed(conn))
        self._reads = RemoteReads(conn, executors)
        self._scopes: dict[str, RemoteScope] = {}
        self._environments = RemoteEnvironments(executors)

    def environment(self, name: str, *, scope: str | None = None) -> EnvironmentHandle:
        """The handle of ``scope``'s instance of environment ``name`` (in its executor)."""
        return EnvironmentHandle(self._environments, name, scope, self._conn.portal.run)

    # ------------------------------------------------------------------ reads (delegated)
    def get(
        self, name: str, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition ``scope`` sees under ``name`` (``run_code`` when presented)."""
        return self._reads.get(name, scope, tool_set)

    def executable(
        self, name: str, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition a call may execute: the step's set decides, else unconditional."""
        return self._reads.executable(name, scope, tool_set)

    def definitions(
        self, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> list[ToolDefinition]:
        """The visible capability definitions (never ``run_code``), in view order."""
        return self._reads.definitions(scope, tool_set)

    def schemas(
        self, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> list[dict[str, Any]]:
        """One detached ``{"name", "description", "parameters"}`` per visible tool."""
        return self._reads.schemas(scope, tool_set)

    def names(self, scope: str | None = None, tool_set: RemoteToolSet | None = None) -> list[str]:
        """Visible capability names, in view order."""
        return self._reads.names(scope, tool_set)

    def known_names(self, scope: str | None = None) -> list[str]:
        """R-SCH-11 ``knownNames`` for the scope's wire contribution."""
        return self._reads.known_names(scope)

    def execution_mode(self, inp: ToolExecutionInput) -> str:
        """``"parallel"`` only when the visible classifier returns exactly ``True``."""
        return self._reads.execution_mode(inp)

    def check_guards(self, execution: ToolExecution) -> str | None:
        """Global guards, then the caller's chain farthest first; the first ``str`` denies."""
        return self._reads.check_guards(execution)

    def stats(self) -> RegistryStatistics:
        """The authoritative registry's counts (scopes, layers, tools, views)."""
        return self._reads.stats()

    async def resolve(self, context: ActivationContext) -> RemoteToolSet:
        """Evaluate every ``when`` visible to the scope, in its executor actor, once."""
        return await self._reads.resolve(context)

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch`` on its scope's executor actor (``rt.executor(batch.scope)``)."""
        return await self._reads.execute_batch(batch)

    async def execute(
        self, inp: ToolExecutionInput, *, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        """Run one call through its scope's executor actor (the core ``execute()``)."""
        return await self._reads.execute(inp, deadline_s=deadline_s)

    def info(self) -> RegistryInfo:
        """Registry counters (contributions, sequence, executors, restarts, leases, scopes)."""
        return self._reads.info()

    def statistics(self) -> RegistryStatistics:
        """Deprecated name of :meth:`stats`."""
        message = "RemoteRegistry.statistics() is deprecated: use stats()"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.stats()

    # ------------------------------------------------------------------ the global context

    def set_approval(self, service: object) -> Disposer:
        """Mount the approval service in every executor actor (it must be picklable)."""
        if not callable(getattr(service, "request", None)):
            raise TypeError("set_approval() takes an object with an async request(request)")
        blob = dumps_named(service, "the approval service")
        return self._apply(Op(id=0, kind="approval", key=None, blob=blob))

    def scope(self, key: str, *, parent: str | None = None) -> RemoteScope:
        """The remote scoped context of ``key`` (created on first use; the same object after).

        Naming a different parent for an existing scope, or a cycle, raises ``ValueError``.
        """
        if not isinstance(key, str):
            raise TypeError("a scope key is a str")
        bound = self._conn.call(RegistryActor.ensure_scope, key, parent)
        found = self._scopes.get(key)
        if found is None:
            found = self._scopes[key] = RemoteScope(self._conn, key, self._feed, self._drop)
        found._parent = bound
        return found

    def _drop(self, key: str) -> None:
        self._scopes.pop(key, None)

    def close(self) -> None:
        """Stop delivering change events (the runtime is shutting down)."""
        self._feed.close()

    def prompt_sections(self, scope: str | None = None) -> list[ToolPromptSection]:
        """Code Mode's system-prompt sections for ``scope`` (``ToolRegistry.prompt_sections``).

        The SDK follows the config's ``[code]`` table (a Python runtime and its imports).
        """
        return list(self._conn.call(RegistryActor.prompt_sections, scope))
