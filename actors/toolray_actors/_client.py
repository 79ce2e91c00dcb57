"""Driver-side facades: the remote registry, remote scopes and executor handles.

Writes are synchronous (they return once every executor has the change, DESIGN.md §2) and
return ordinary :class:`toolray.Disposer` objects. Definitions, hooks and guards travel as
cloudpickle blobs; one that cannot be pickled fails at once with a ``TypeError`` naming it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

import ray

from toolray import (
    Disposer,
    ToolBatchExecutionError,
    ToolBatchInput,
    ToolBatchResult,
    ToolCallResult,
    ToolDefinition,
    ToolExecutionInput,
    ToolExecutionResult,
)

from ._errors import is_actor_death, task_cause, translate_remote_errors, wire_reason
from ._executor_actor import BatchSpec, ExecutorActor
from ._handles import create_executor, executor_name, get_named
from ._mirror import Op, dumps_named

if TYPE_CHECKING:
    from ._runtime import RayRuntime

__all__ = ("ExecutorHandle", "RemoteRegistry", "RemoteScope")


class _RemoteWriter:
    """The write API of one context, executed by the registry actor."""

    def __init__(self, actor: Any, key: str | None) -> None:
        self._actor = actor
        self._key = key

    def _apply(self, op: Op) -> Disposer:
        with translate_remote_errors():
            op_id = ray.get(self._actor.apply.remote(op))
        actor = self._actor
        return Disposer(lambda: ray.get(actor.dispose.remote(op_id)))

    def register(
        self, definition: ToolDefinition, *, when: Callable[..., Any] | None = None
    ) -> Disposer:
        """Register a tool (the definition is pickled; the actor validates it)."""
        name = getattr(definition, "name", "?")
        blob = dumps_named(definition, f'tool "{name}"')
        when_blob = dumps_named(when, f'the when condition of tool "{name}"') if when else None
        return self._apply(
            Op(id=0, kind="register", key=self._key, blob=blob, when=when_blob, name=name)
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
        """Not available remotely: a change listener runs synchronously inside the registry.

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

    def __init__(self, actor: Any, key: str, parent: str | None) -> None:
        super().__init__(actor, key)
        self.key = key
        self.parent = parent

    def dispose(self) -> None:
        """Unwind everything registered through this scope."""
        ray.get(self._actor.dispose_scope.remote(self.key))


class RemoteRegistry(_RemoteWriter):
    """The global context and the read side of the namespace's registry actor."""

    def __init__(self, actor: Any, runtime: RayRuntime | None = None) -> None:
        super().__init__(actor, None)
        self._runtime = runtime

    def set_approval(self, service: Any) -> Disposer:
        """Mount the approval service in every executor actor (it must be picklable)."""
        blob = dumps_named(service, "the approval service")
        return self._apply(Op(id=0, kind="approval", key=None, blob=blob))

    def definitions(self, scope: str | None = None) -> list[ToolDefinition]:
        """The visible capability definitions (unpickled here), in view order."""
        return [d for d in (self.get(n, scope) for n in self.names(scope)) if d is not None]

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch`` on its scope's executor actor (``rt.executor(batch.scope)``)."""
        if self._runtime is None:
            raise RuntimeError("this RemoteRegistry has no runtime to run batches on")
        return await self._runtime.executor(batch.scope).execute_batch(batch)

    async def execute(self, inp: ToolExecutionInput) -> ToolExecutionResult:
        """Run one call through its scope's executor actor."""
        if self._runtime is None:
            raise RuntimeError("this RemoteRegistry has no runtime to run calls on")
        return await self._runtime.executor(inp.scope).execute(inp)

    def scope(self, key: str, *, parent: str | None = None) -> RemoteScope:
        """The remote scoped context (created on first use)."""
        with translate_remote_errors():
            ray.get(self._actor.ensure_scope.remote(key, parent))
        return RemoteScope(self._actor, key, parent)

    def schemas(self, scope: str | None = None) -> list[dict[str, Any]]:
        """Model-facing schemas as ``scope`` sees them."""
        with translate_remote_errors():
            return list(ray.get(self._actor.schemas.remote(scope)))

    def names(self, scope: str | None = None) -> list[str]:
        """Visible capability names, in view order."""
        return list(ray.get(self._actor.names.remote(scope)))

    def get(self, name: str, scope: str | None = None) -> ToolDefinition | None:
        """The definition ``scope`` sees (unpickled here)."""
        import cloudpickle

        blob = ray.get(self._actor.definition_blob.remote(name, scope))
        return cloudpickle.loads(blob) if blob is not None else None

    def info(self) -> dict[str, Any]:
        """Registry counters (contributions, sequence, executors, restarts)."""
        return dict(ray.get(self._actor.info.remote()))


class ExecutorHandle:
    """The driver's handle on one scope's executor actor (created on first use)."""

    def __init__(self, runtime: RayRuntime, scope: str | None) -> None:
        self.runtime = runtime
        self.scope = scope
        self._actor: Any = None
        self._owner: Any = None
        self.last_trace: list[dict[str, Any]] = []
        """The trace of the last batch this handle ran (spans per call, stage instants)."""

    @property
    def name(self) -> str:
        """The executor actor's name."""
        return executor_name(self.scope)

    async def _ensure(self) -> Any:
        # Keep the first handle: a non-detached actor lives while its owner's handle does.
        if self._actor is not None:
            return self._actor
        for attempt in range(20):
            actor = get_named(self.name, self.runtime.config.namespace)
            if actor is None:
                # Keep the creating (owner) handle for the handle's lifetime: a concurrent
                # _ensure may adopt a borrowed handle, and the actor must outlive both.
                actor = self._owner = self._create()
            try:
                await actor.ready.remote()
            except Exception as err:
                # A reaped executor's name can outlive it for a moment: try again shortly.
                if not is_actor_death(task_cause(err)) and not is_actor_death(err):
                    raise
                if attempt == 19:
                    raise
                await asyncio.sleep(0.1)
                continue
            if self._actor is None:
                self._actor = actor
            return self._actor
        raise AssertionError("unreachable")

    async def _reserved(self, batch_id: str) -> Any:
        """An executor that has accepted ``batch_id``.

        Nothing has started if this fails, so a reaped or dead actor is replaced and the
        reservation retried (never the batch).
        """
        for attempt in range(5):
            actor = await self._ensure()
            try:
                await actor.reserve.remote(batch_id)
            except Exception as err:
                if attempt == 4 or not (is_actor_death(err) or is_actor_death(task_cause(err))):
                    raise
                self._actor = None
                continue
            return actor
        raise AssertionError("unreachable")

    def _create(self) -> Any:
        rt = self.runtime
        return create_executor(
            ExecutorActor,
            self.scope,
            rt.config.namespace,
            rt.config.detached,
            self.scope,
            rt.config.namespace,
            rt.config.model_dump(),
        )

    def _forget_if_dead(self, raw: BaseException) -> None:
        if is_actor_death(raw) or is_actor_death(task_cause(raw)):
            self._actor = None

    def _spec(self, batch: ToolBatchInput, batch_id: str) -> BatchSpec:
        if batch.tool_set is not None:
            raise ValueError("tool_set is in-process only: resolve conditions in the executor")
        if batch.scope is not None and batch.scope != self.scope:
            raise ValueError(f"batch scope {batch.scope!r} is not this executor's {self.scope!r}")
        log = batch.log
        return BatchSpec(
            batch_id=batch_id,
            calls=tuple(batch.calls),
            max_parallel_tool_calls=batch.max_parallel_tool_calls,
            log=(log.turn, log.step) if log is not None else None,
            aborted=batch.signal.aborted,
            reason=wire_reason(batch.signal.reason) if batch.signal.aborted else None,
        )

    def _forward_abort(self, actor: Any, batch: ToolBatchInput, batch_id: str) -> Disposer:
        return batch.signal.add_listener(
            lambda: actor.cancel.remote(batch_id, wire_reason(batch.signal.reason))
        )

    @staticmethod
    def _deliver_events(batch: ToolBatchInput, events: list[Any]) -> None:
        if batch.log is None:
            return
        for event in events:
            batch.log.sink.append(event)
        sync = getattr(batch.log.sink, "sync", None)
        if sync is not None:
            sync()

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch`` on the executor actor; an actor death raises ToolBatchExecutionError."""
        batch_id = uuid.uuid4().hex
        spec = self._spec(batch, batch_id)
        try:
            actor = await self._reserved(batch_id)
            stop = self._forward_abort(actor, batch, batch_id)
            try:
                result, events, self.last_trace = await actor.execute_batch.remote(spec)
            finally:
                stop()
        except Exception as raw:
            self._forget_if_dead(raw)
            raise _batch_failure(raw) from None
        self._deliver_events(batch, events)
        return result  # type: ignore[no-any-return]

    async def stream_batch(
        self, batch: ToolBatchInput
    ) -> AsyncIterator[tuple[int, ToolCallResult]]:
        """Yield ``(index, ToolCallResult)`` as each result commits (model order)."""
        batch_id = uuid.uuid4().hex
        spec = self._spec(batch, batch_id)
        try:
            actor = await self._reserved(batch_id)
        except Exception as raw:
            raise _batch_failure(raw) from None
        stop = self._forward_abort(actor, batch, batch_id)
        try:
            stream = actor.stream_batch.options(num_returns="streaming").remote(spec)
            async for ref in stream:
                try:
                    item = await ref
                except Exception as raw:
                    self._forget_if_dead(raw)
                    raise _batch_failure(raw) from None
                if item[0] == "item":
                    yield item[1], item[2]
                else:
                    self._deliver_events(batch, item[2])
                    self.last_trace = item[3]
        finally:
            stop()

    def execute_batch_sync(self, batch: ToolBatchInput) -> ToolBatchResult:
        """``execute_batch`` for scripts without an event loop."""
        return asyncio.run(self.execute_batch(batch))

    async def execute(self, inp: ToolExecutionInput) -> ToolExecutionResult:
        """One call through the executor actor's pipeline (arguments must be lossless JSON)."""
        import json

        from toolray import ToolCall

        call = ToolCall(inp.call_id, inp.name, json.dumps(inp.arguments))
        actor = await self._ensure()
        reason = wire_reason(inp.signal.reason) if inp.signal.aborted else None
        with translate_remote_errors():
            return await actor.execute.remote(call, reason, inp.signal.aborted)  # type: ignore[no-any-return]

    async def statistics(self) -> Any:
        """The executor actor's ``ExecutorStats``."""
        actor = await self._ensure()
        return await actor.statistics.remote()


def _batch_failure(raw: BaseException) -> BaseException:
    err = task_cause(raw)
    if isinstance(err, ToolBatchExecutionError):
        return err
    if is_actor_death(err) or is_actor_death(raw):
        return ToolBatchExecutionError(f"the executor actor died mid-batch: {err}")
    return ToolBatchExecutionError(f"tool batch failed: {err}")
