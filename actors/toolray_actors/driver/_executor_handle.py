"""``ExecutorHandle``: the driver's handle on the executor actor serving one scope.

A batch streams back as it commits, so whatever happens the caller gets one result per
call, in model order: the actor dying under the batch keeps the results that reached the
driver (``execute_batch``'s arrive at most 10 ms after they commit) and fails every other
call ``EXECUTOR_LOST``, the log completed with synthetic records; a cancelled caller's task
(or a stream closed early) aborts the remote batch with the ``CancelledError`` as reason; an
actor reaped, killed or crashed between batches is recreated by the next call (a batch it
never started is sent again, as its ledger — ``toolray_actors._ledger`` — says).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar

import ray.exceptions as rex

from toolray import (
    AbortSignal,
    ActivationContext,
    EnvironmentHandle,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolCallResult,
    ToolExecutionInput,
    ToolExecutionResult,
)
from toolray_actors._config import RuntimeConfig
from toolray_actors._env_wire import EnvRequest
from toolray_actors._errors import env_lost, is_actor_death, is_retiring, translate, wire_reason
from toolray_actors._handles import control_options, create_executor, get_named
from toolray_actors._ledger import DRIVER
from toolray_actors._remote import Handle, known_dead, retrying, send
from toolray_actors._toolset import RemoteToolSet, raise_if_aborted, wire_tool_set
from toolray_actors._tracing import DriverTrace
from toolray_actors._wire import CallSpec, StreamChunk, StreamEnd, unknown
from toolray_actors.execution._executor_actor import BatchSpec, ExecutorActor, ExecutorStats

from ._batch_spec import bounded_batch, bounded_input, spec_of
from ._batch_stream import Accumulator
from ._connection import Connection
from ._env_service import RemoteEnvironments
from ._submissions import Inbox
from ._unstarted import LedgerRef, Ready, never_started

__all__ = ("ExecutorHandle",)

_ENSURE_ATTEMPTS = 60

_RESERVE_RETRIES = (0.0,) * 4
"""A reservation is sent again at once to a new actor, up to five times in all."""

_P = ParamSpec("_P")
_R = TypeVar("_R")

_PER_SCOPE_CALLS = 1000
"""Concurrent method calls of a per-scope executor actor."""

_SHARD_CALLS = 10_000
"""Concurrent method calls of a shard (a ``run_batch`` per running batch of its scopes…)."""


class ExecutorHandle:
    """The driver's handle on one scope's executor actor (created on first use)."""

    def __init__(self, conn: Connection, scope: str | None) -> None:
        self._conn = conn
        self.scope = scope
        self.name, self._created_for = conn.executor_target(scope)
        self._actor: Handle | None = None
        self._ready: Ready | None = None
        self._exiting: Handle | None = None  # the last actor that refused as it exited
        self.recreated = 0
        self.last_trace: list[dict[str, Any]] = []
        """The trace of the last batch this handle ran (spans per call, stage instants)."""

    @property
    def config(self) -> RuntimeConfig:
        """The runtime's configuration."""
        return self._conn.config

    @property
    def _what(self) -> str:
        return f"the executor actor {self.name!r}"

    # ------------------------------------------------------------------ the actor
    def _create(self) -> Handle:
        cfg = self._conn.config
        return create_executor(
            ExecutorActor,
            self.name,
            cfg.namespace,
            control_options(cfg.control_resource),
            self.name,
            self._created_for,
            cfg.namespace,
            cfg.model_dump(),
            max_concurrency=_PER_SCOPE_CALLS if self._created_for is not None else _SHARD_CALLS,
        )

    async def _ensure(self) -> Handle:
        if self._actor is not None:
            if not known_dead(self._actor):
                return self._actor
            self._lost()  # reaped or killed since: nothing is sent to it
        self._conn._check_open()
        # the scopes of one shard share one start: one lookup and one ready, not one each
        ready = await self._conn.executors.get(self.name, self._start)
        if known_dead(ready.actor):  # another handle's, gone since
            self._conn.executors.drop(self.name, ready)
            ready = await self._conn.executors.get(self.name, self._start)
        if self._actor is None:
            self._actor, self._ready = ready.actor, ready
        return self._actor

    @property
    def _ledger(self) -> LedgerRef | None:
        return self._ready.ledger if self._ready is not None else None

    async def _start(self) -> Ready:
        """Find (or create) the named actor and wait until it is ready (joining its ledger)."""

        async def attempt() -> Ready:
            actor = get_named(self.name, self._conn.namespace) or self._create()
            return Ready(actor, LedgerRef.of(await send(actor, ExecutorActor.ready, DRIVER)))

        # A reaped or killed executor's name can outlive it for a moment.
        pauses = (min(0.02 * (n + 1), 0.5) for n in range(_ENSURE_ATTEMPTS - 1))
        actor = await retrying(attempt, self._what, pauses)
        self.recreated += 1
        return actor

    def _lost(self) -> None:
        ready, self._actor, self._ready = self._ready, None, None
        if ready is not None:
            self._conn.executors.drop(self.name, ready)

    async def _reserved(self, batch_id: str) -> Handle:
        """An executor that has accepted ``batch_id`` (a dead one is replaced: nothing ran)."""

        async def attempt() -> Handle:
            actor = await self._ensure()
            await send(actor, ExecutorActor.reserve, batch_id)
            return actor

        return await retrying(attempt, self._what, _RESERVE_RETRIES, recover=self._lost)

    async def _submitted(self, spec: BatchSpec) -> tuple[Handle, Inbox]:
        """Submit ``spec`` (with this tick's other batches): ``(actor, the batch's inbox)``.

        A failed reservation means the actor was dead before the batch reached it: the
        actor is replaced and both are sent again (see ``Submissions``).
        """

        async def attempt() -> tuple[Handle, Inbox]:
            actor = await self._ensure()
            inbox = await self._conn.submissions.submit(self.name, actor, spec, self._ledger)
            return actor, inbox

        return await retrying(attempt, self._what, _RESERVE_RETRIES, recover=self._lost)

    # ------------------------------------------------------------------ batches
    def _check_scope(self, scope: str | None) -> None:
        if scope != self.scope:
            raise ValueError(f"scope {scope!r} is not this executor's {self.scope!r}")

    async def _entries(
        self, batch: ToolBatchInput, acc: Accumulator, *, paced: bool = False
    ) -> AsyncIterator[tuple[int, ToolCallResult]]:
        batch_id = uuid.uuid4().hex
        spec = spec_of(batch, self.scope, batch_id, paced=paced)  # misuse raises here
        traced = DriverTrace.start(self.scope, spec.calls)
        if traced is not None:
            spec = dataclasses.replace(spec, trace=str(traced.parent))
            acc.on_span = traced.record
        failure: BaseException | None = None
        try:
            async for committed in self._stream(spec, batch, acc):
                yield committed
        except (Exception, asyncio.CancelledError) as err:
            failure = err
            raise
        finally:
            if traced is not None:
                traced.finish(self.scope, acc.results, failure)

    async def _stream(
        self, spec: BatchSpec, batch: ToolBatchInput, acc: Accumulator
    ) -> AsyncIterator[tuple[int, ToolCallResult]]:
        async with self._conn.admission.slot(self.name, batch.signal):  # backpressure
            if batch.signal.aborted:  # (while it waited) the executor ends it at once
                spec = dataclasses.replace(
                    spec, aborted=True, reason=wire_reason(batch.signal.reason)
                )
            for _ in _RESERVE_RETRIES:  # sent again while the actor died before starting it
                unstarted: list[bool] = []
                async for committed in self._attempt(spec, batch, acc, unstarted):
                    yield committed
                if not unstarted:
                    return
                if batch.signal.aborted:  # aborted meanwhile: the next actor hears it at once
                    reason = wire_reason(batch.signal.reason)
                    spec = dataclasses.replace(spec, aborted=True, reason=reason)
            async for committed in self._attempt(spec, batch, acc, None):
                yield committed

    async def _attempt(
        self, spec: BatchSpec, batch: ToolBatchInput, acc: Accumulator, unstarted: list[bool] | None
    ) -> AsyncIterator[tuple[int, ToolCallResult]]:
        """Send ``spec`` once; ``unstarted`` is filled if its actor died before starting it."""
        batch_id = spec.batch_id
        actor, inbox = await self._submitted(spec)
        signal = batch.signal
        stop = signal.add_listener(
            lambda: send(actor, ExecutorActor.cancel, batch_id, wire_reason(signal.reason))
        )
        reason: object = "the batch stream was closed"
        try:
            async for item in inbox.items():
                match item:
                    case StreamEnd(contexts, concluded, trace, entries):
                        for committed in acc.take(entries):
                            yield committed
                        acc.finish(contexts, concluded)
                        self.last_trace = trace
                        break  # the last item: no need to wait for the stream's end
                    case StreamChunk(entries):
                        for committed in acc.take(entries):
                            yield committed
                    case _:
                        unknown(item, "a batch stream")
        except asyncio.CancelledError as err:
            reason = err
            raise
        except rex.RayError as err:
            if not is_actor_death(err):
                raise translate(err, self._what) from None
            self._lost()
            ticket = inbox.ticket
            if unstarted is not None and ticket is not None and await never_started(ticket):
                unstarted.append(True)
                return
            for committed in acc.lose(err):
                yield committed
        finally:
            stop()
            if not acc.done and not unstarted:
                send(actor, ExecutorActor.cancel, batch_id, wire_reason(reason))
            acc.sync()
        if not acc.done:  # the stream ended without its end record: the actor went away
            self._lost()
            for committed in acc.lose(None):
                yield committed

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch``: one result per call, in model order, whatever happens."""
        batch, deadline = bounded_batch(batch, self.config.kill_grace_ms)
        try:
            acc = Accumulator(batch, scope=self.scope)
            async for _ in self._entries(batch, acc, paced=True):  # only the end is read
                pass
        finally:
            deadline.release()
        return acc.result()

    async def stream_batch(
        self, batch: ToolBatchInput
    ) -> AsyncIterator[tuple[int, ToolCallResult]]:
        """Yield ``(index, ToolCallResult)`` as each result commits (model order)."""
        batch, deadline = bounded_batch(batch, self.config.kill_grace_ms)
        try:
            acc = Accumulator(batch, scope=self.scope)
            async for item in self._entries(batch, acc):
                yield item
        finally:
            deadline.release()

    def execute_batch_sync(self, batch: ToolBatchInput) -> ToolBatchResult:
        """``execute_batch`` from a script or from inside a running loop (Jupyter)."""
        return self._conn.portal.run(self.execute_batch(batch))

    # ------------------------------------------------------------------ one call
    async def _forwarded(
        self,
        key: str,
        signal: AbortSignal,
        method: Callable[Concatenate[ExecutorActor, _P], Coroutine[object, object, _R]],
        *args: _P.args,
        **kwargs: _P.kwargs,
    ) -> _R:
        """Call ``method`` on the actor (``key`` reserved), forwarding ``signal``'s aborts.

        An abort that happened before is part of the request; a later one (the signal, or
        the cancellation of the awaiting task) reaches the actor as ``cancel(key, reason)``.
        """
        actor = await self._reserved(key)
        stop = signal.add_listener(
            lambda: send(actor, ExecutorActor.cancel, key, wire_reason(signal.reason))
        )
        try:
            return await send(actor, method, *args, **kwargs)
        except asyncio.CancelledError as err:
            send(actor, ExecutorActor.cancel, key, wire_reason(err))
            raise
        except rex.RayError as err:
            if is_actor_death(err):
                self._lost()
            raise
        finally:
            stop()

    async def execute(
        self, inp: ToolExecutionInput, *, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        """One call through the executor actor's pipeline, with the core's fidelity.

        Arguments travel as they are when lossless JSON, else as the P-ARGS-4 failure;
        ``root_call_id``, ``schema``, ``tool_set`` and ``parent`` (by token id: the
        executor accepts only a live execution it issued) travel; aborts are forwarded.
        ``deadline_s`` bounds the call as a batch's deadline does (``DEADLINE_EXCEEDED``).
        """
        if not isinstance(inp, ToolExecutionInput):
            raise TypeError(f"execute() takes a ToolExecutionInput, not {type(inp).__name__}")
        self._check_scope(inp.scope)
        inp, deadline = bounded_input(inp, deadline_s, self.config.kill_grace_ms)
        try:
            return await self._execute(inp)
        finally:
            deadline.release()

    async def _execute(self, inp: ToolExecutionInput) -> ToolExecutionResult:
        key = uuid.uuid4().hex
        spec = CallSpec.of(inp, key, wire_tool_set(inp.tool_set))
        try:
            return await self._forwarded(key, inp.signal, ExecutorActor.execute_call, spec)
        except rex.RayError as err:
            if not is_actor_death(err):
                raise translate(err, self._what) from None
            batch = ToolBatchInput([ToolCall(inp.call_id, inp.name, "{}")], inp.signal)
            _, lost = next(iter(Accumulator(batch, log=False).lose(err)))
            return lost.result

    async def resolve(self, context: ActivationContext) -> RemoteToolSet:
        """Evaluate the scope's ``when`` conditions in this executor actor (one step)."""
        if not isinstance(context, ActivationContext):
            raise TypeError(f"resolve() takes an ActivationContext, not {type(context).__name__}")
        self._check_scope(context.scope)
        signal = context.signal
        raise_if_aborted(signal)
        key = uuid.uuid4().hex
        try:
            ids = await self._forwarded(
                key, signal, ExecutorActor.resolve, key, context.scope, context.model, False, None
            )
        except rex.RayError as err:
            raise_if_aborted(signal)  # the caller's own reason, as in-process
            raise translate(err, self._what) from None
        raise_if_aborted(signal)  # aborted while the answer came back: publish nothing
        return RemoteToolSet(context.scope, ids, self._conn)

    # ------------------------------------------------------------------ environments
    def environment(self, name: str) -> EnvironmentHandle:
        """The handle of this scope's instance of environment ``name``."""
        service = RemoteEnvironments(
            lambda scope: self if scope == self.scope else ExecutorHandle(self._conn, scope)
        )
        return EnvironmentHandle(service, name, self.scope, self._conn.portal.run)

    async def environment_request(self, request: EnvRequest) -> object:
        """One environment request; the actor dying under it loses the instances it held."""
        actor = await self._ensure()
        try:
            return await send(actor, ExecutorActor.environment, request)
        except rex.RayError as err:
            retiring = is_retiring(err)
            if not retiring and not is_actor_death(err):
                raise translate(err, self._what) from None
            self._lost()
            if retiring:  # then its death, too, loses nothing: it held no instance
                self._exiting = actor
            raise env_lost(actor == self._exiting, self._what) from None

    def execute_sync(
        self, inp: ToolExecutionInput, *, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        """``execute`` from a script or from inside a running loop."""
        return self._conn.portal.run(self.execute(inp, deadline_s=deadline_s))

    async def statistics(self) -> ExecutorStats:
        """The executor actor's ``ExecutorStats`` (the actor starts if it is not running)."""

        async def attempt() -> ExecutorStats:
            return await send(await self._ensure(), ExecutorActor.statistics)

        return await retrying(attempt, self._what, (0.0, 0.0), recover=self._lost)
