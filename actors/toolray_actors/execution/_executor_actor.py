"""``ExecutorActor``: mirrors the registry and runs the core scheduler for its scopes.

It runs the core ``BatchExecutor`` unchanged (pipeline, policies, ordered lane) over a mirror
of the registry, body dispatch replaced by :class:`RayBodyRunner`; the registry actor's
invalidations keep the mirror current (on this actor's single loop: a call sees a change whole
or not at all). Each batch is its own run (lane, cap, abort, barriers), so one actor hosts one
scope (``per_scope``) or many (``sharded``) with the same per-scope semantics.

Batches stream back as they commit (``_streaming``): a driver keeps what reached it before
an executor death. Its scopes' environment instances live on workers (``envs``). Idle for
a TTL, holding no instance nor a live reservation (``_reservations``), it detaches and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from toolray import (
    AbortController,
    BatchExecutor,
    LogStep,
    ModelSelection,
    RateLimit,
    ToolBatchInput,
    ToolBatchResult,
    ToolExecutionResult,
)
from toolray.lowlevel import Observer, SystemClock, TraceParent, observe
from toolray_actors import _wire as wire
from toolray_actors._collector import pace_collector
from toolray_actors._config import RuntimeConfig
from toolray_actors._env_wire import EnvRequest
from toolray_actors._errors import ExecutorRetiringError, namespace_ended
from toolray_actors._executor_wire import BatchSpec, ExecutorStats
from toolray_actors._farm_stats import FarmObserver
from toolray_actors._handles import get_named, kill_self, registry_name
from toolray_actors._ledger import FirstCall, Ledger, joined, stamp_of
from toolray_actors._mirror import Mirror, Op
from toolray_actors._remote import actor_id, node_id, send
from toolray_actors._stats import ActorStats, actor_stats
from toolray_actors._tracing import SpanRecorder
from toolray_actors.control._registry_actor import RegistryActor
from toolray_actors.control._store import Store

from ._code_pool import CodePool, code_registry
from ._env_service import EnvService
from ._executor_calls import CallService
from ._metrics import CallMetrics, flush_every
from ._placements import Placements
from ._pool import PoolManager
from ._rate_client import RayRateLimiter
from ._reservations import Reservations
from ._runner import RayBodyRunner
from ._streaming import Feed, merged, streamed

__all__ = ("BatchSpec", "ExecutorActor", "ExecutorStats")

_Trace = list[dict[str, Any]]
"""A batch's trace: spans per call and stage instants (``BatchExecutor.execute``'s)."""
_METRICS_FLUSH_S = 1.0  # how often the calls counted here reach the Ray metrics


class ExecutorActor:
    """Runs batches for the scopes routed to it (single calls: its ``calls``, a CallService)."""

    def __init__(self, name: str, scope: str | None, namespace: str, config: dict[str, Any]):
        pace_collector()
        self.name = name
        self.scope = scope
        self.namespace = namespace
        self.config = RuntimeConfig.model_validate(config)
        self.code = CodePool(self.config.code)
        self.seq = -1
        self.reservations = Reservations({})
        self.batches: dict[str, AbortController] = self.reservations.batches
        self.placements = Placements(namespace, self.config)
        self.scopes_seen: set[str | None] = set()
        self.runner = RayBodyRunner(
            self.placements.pool_for,
            lambda definition: self.mirror.key_of(definition),
            cancel_grace_ms=self.config.cancel_grace_ms,
            kill_grace_ms=self.config.kill_grace_ms,
            home=(name, namespace),
            on_kill=self.placements.killed,
            node=node_id() if self.config.worker_transport == "local" else None,
        )
        self.envs = EnvService(
            self.placements, lambda: self.mirror, SystemClock(), name, self.runner.env_lane
        )
        self.calls = CallService(
            lambda: self.mirror, self.runner, self.reservations, self.scopes_seen, self._touch
        )
        overrides = {t: RateLimit(**c.model_dump()) for t, c in self.config.rate_limits.items()}
        self.limiter = RayRateLimiter(self.placements.bucket_for, overrides)
        self._rebuild([])
        self.last_active = time.monotonic()
        self._attached = False
        self._reaper: asyncio.Task[None] | None = None
        self.farm = FarmObserver()  # every call this actor runs: statistics and metrics
        observe(self.farm)  # for the actor's lifetime
        self.metrics = CallMetrics()
        self._flusher: asyncio.Task[None] | None = None
        self.closing = False
        self.ledger = Ledger.open(actor_id())  # which batches started, for drivers

    # ------------------------------------------------------------------ the mirror
    def _rebuild(self, ops: list[Op]) -> None:
        registry = code_registry(self.config, self.code, self.limiter, self.envs.instances)
        self.mirror = Mirror(registry, on_forget=self.placements.forget_code)
        for op in ops:
            self.mirror.apply(op)
        self.executor = BatchExecutor(
            self.mirror.registry,
            max_parallel_tool_calls=self.config.max_parallel_tool_calls,
            runner=self.runner,
            kill_grace_ms=self.config.kill_grace_ms,
        )

    async def ready(self, driver: str = "") -> dict[str, Any]:
        """Attach to the registry (once) and mirror its state; ``driver`` joins the ledger."""
        if not self._attached:
            registry = get_named(registry_name(), self.namespace)
            if registry is None:  # the namespace ended: say why, and do not linger
                asyncio.get_running_loop().call_later(0.2, kill_self)
                why = await asyncio.to_thread(Store(self.namespace).read_tombstone)
                raise namespace_ended(self.namespace, why)
            seq, ops = await send(registry, RegistryActor.attach_executor, self.name)
            await self.envs.start()  # a predecessor's instances are known lost first
            if not self._attached:
                self._rebuild(ops)
                self.envs.free_orphans()
                self.seq = seq
                self._attached = True
                self._reaper = asyncio.ensure_future(self._reap())
                flush = functools.partial(self.metrics.flush, self.farm)
                self._flusher = asyncio.ensure_future(flush_every(_METRICS_FLUSH_S, flush))
            pool = self.placements.pool_for(None)
            await send(pool.manager, PoolManager.ready)
            await pool.refresh()  # the first batch's calls then leave in one tick, coalesced
        self.last_active = time.monotonic()
        where = {"ledger": joined(self.ledger, driver), "node": node_id()}
        return {"name": self.name, "pid": os.getpid(), "seq": self.seq} | where

    async def apply_changes(self, first: int, deltas: tuple[wire.RegistryChange, ...]) -> int:
        """Apply registry changes ``first, first + 1, …`` in order; the applied sequence.

        A gap or a change that does not apply makes the mirror resync from the registry.
        """
        disposed: list[str] = []
        try:
            for seq, delta in enumerate(deltas, start=first):
                if seq <= self.seq:
                    continue
                if seq != self.seq + 1:
                    raise LookupError("sequence gap")
                self._change(delta, disposed)
                self.seq = seq
        except Exception:
            await self._resync()
        for key in disposed:  # a disposed scope's environment instances close with it
            await self.envs.close_scope(key)
        return self.seq

    def _change(self, delta: wire.RegistryChange, disposed: list[str]) -> None:
        match delta:
            case wire.Added(op):
                self.mirror.apply(op)
            case wire.Removed(op_id):
                self.mirror.remove(op_id)
            case wire.Swapped(old_id, op):
                self.mirror.swap(old_id, op)
            case wire.ScopeDisposed(key, op_ids):  # in a shard: this scope's state only
                self.mirror.dispose_scope(key, op_ids)
                self.scopes_seen.discard(key)
                self.farm.forget_scope(key)
                disposed.append(key)
            case _:
                wire.unknown(delta, "a registry change")

    async def _resync(self) -> None:
        registry = get_named(registry_name(), self.namespace)
        if registry is None:
            return
        seq, ops = await send(registry, RegistryActor.snapshot)
        self._rebuild(ops)
        self.seq = seq

    # ------------------------------------------------------------------ batches
    async def reserve(self, *batch_ids: str) -> bool:
        """Claim this actor for batches about to come (an idle reap now waits for them)."""
        await self._refuse_if_closing()  # its failure then says "not started"
        self.last_active = time.monotonic()
        self.reservations.reserve(batch_ids, self.last_active)
        return True

    def _batch(self, spec: BatchSpec, feed: Feed) -> ToolBatchInput:
        ctrl = self.reservations.claim(spec.batch_id, spec.aborted, spec.reason)
        step = LogStep(*spec.log, feed) if spec.log is not None else None
        self.scopes_seen.add(spec.scope)
        return ToolBatchInput(
            spec.calls,
            ctrl.signal,
            max_parallel_tool_calls=spec.max_parallel_tool_calls,
            scope=spec.scope,
            tool_set=self.calls.tool_set(spec.tool_set),
            log=step,
            deadline_s=spec.deadline_s,
        )

    def _start(
        self, spec: BatchSpec, ticket: tuple[str, int] | None = None
    ) -> tuple[asyncio.Task[ToolBatchResult], Feed, _Trace]:
        """Start ``spec``'s run (a ``ticket`` enters the ledger as its first call starts)."""
        self.last_active = time.monotonic()
        queue: asyncio.Queue[wire.StreamEntry] = asyncio.Queue()
        trace: _Trace = []
        commits = Feed(queue, len(spec.calls))
        batch = self._batch(spec, commits)
        parent = TraceParent.parse(spec.trace)
        recorder: Observer | None = (
            SpanRecorder(parent, queue.put_nowait) if parent is not None else None
        )
        if ticket is not None and self.ledger is not None:
            recorder = FirstCall(functools.partial(self.ledger.started, *ticket), recorder)
        run = self.calls.run_batch(self.executor, batch, commits, trace, recorder)
        return asyncio.ensure_future(run), commits, trace

    def _ended(self, spec: BatchSpec, task: asyncio.Task[ToolBatchResult]) -> None:
        if not task.done():  # the stream was cancelled: abort, then let the run drain
            self.batches[spec.batch_id].abort("the batch stream was cancelled")
        self.batches.pop(spec.batch_id, None)
        self.last_active = time.monotonic()

    async def run_batch(
        self, spec: BatchSpec, ticket: tuple[str, int] | None = None
    ) -> AsyncIterator[wire.StreamItem]:
        """Stream one batch as it commits (``wire.StreamChunk``), then its ``wire.StreamEnd``."""
        task, commits, trace = self._start(spec, ticket)
        try:
            async for item in streamed(task, commits, trace, spec.paced):
                yield item
        finally:
            self._ended(spec, task)

    async def run_small(
        self, spec: BatchSpec, ticket: tuple[str, int] | None = None
    ) -> wire.StreamEnd:
        """One batch as one reply: its end record, carrying every entry (a one-call batch)."""
        task, commits, trace = self._start(spec, ticket)
        try:
            result = await asyncio.shield(task)  # a cancelled reply aborts the run instead
        finally:
            self._ended(spec, task)
        entries = [commits.queue.get_nowait() for _ in range(commits.queue.qsize())]
        return wire.StreamEnd(tuple(result.additional_contexts), result.concluded, trace, entries)

    # across Ray (what drivers call): specs and items as ``wire.encode`` bytes
    async def run_batch_wire(self, spec: bytes) -> AsyncIterator[bytes]:
        """:meth:`run_batch` across Ray (``spec`` ``stamped``: its ticket enters the ledger)."""
        await self._refuse_if_closing()
        batch = cast("BatchSpec", wire.decode(spec))
        async for item in self.run_batch(batch, stamp_of(spec)):
            yield wire.encode(item)

    async def run_small_wire(self, spec: bytes) -> bytes:
        """:meth:`run_small` across Ray (``spec`` ``stamped``: its ticket enters the ledger)."""
        await self._refuse_if_closing()
        batch = cast("BatchSpec", wire.decode(spec))
        return wire.encode(await self.run_small(batch, stamp_of(spec)))

    async def run_batches_wire(
        self, specs: bytes, driver: str = "", tickets: tuple[int, ...] = ()
    ) -> AsyncIterator[bytes]:
        """Several batches at once, their items merged by tick."""
        await self._refuse_if_closing()
        batches = cast("tuple[BatchSpec, ...]", wire.decode(specs))
        of = {b.batch_id: (driver, t) for b, t in zip(batches, tickets, strict=False) if t}
        async for chunk in merged(lambda b: self.run_batch(b, of.get(b.batch_id)), batches):
            yield wire.encode(chunk)

    async def _refuse_if_closing(self) -> None:
        """Reaped: the kill is on its way; what arrives now never starts (as the ledger says)."""
        if self.closing:
            await asyncio.Event().wait()

    async def cancel(self, batch_id: str, reason: Any = None) -> bool:
        """Abort a running batch (the driver's signal fired, or its task was cancelled)."""
        if (ctrl := self.batches.get(batch_id)) is not None:
            ctrl.abort(reason)
        return ctrl is not None

    # ------------------------------------------------------------------ lifecycle
    def _idle(self) -> bool:
        now, ttl_s = time.monotonic(), self.config.executor_idle_ttl_s
        self.reservations.drop_expired(now, ttl_s)  # a batch that never came holds nothing
        busy = self.batches or self.runner.stats.in_flight or self.envs.holding()
        return now - self.last_active >= ttl_s and not busy

    async def _reap(self) -> None:
        while True:
            await asyncio.sleep(min(self.config.executor_idle_ttl_s / 4, 30.0))
            if not self._idle():
                continue
            registry = get_named(registry_name(), self.namespace)
            if registry is not None:
                await send(registry, RegistryActor.detach_executor, self.name)
            if not self._idle():  # work arrived while detaching: stay, and mirror again
                if registry is not None:
                    seq, ops = await send(registry, RegistryActor.attach_executor, self.name)
                    self._rebuild(ops)
                    self.seq = seq
                continue
            last = await self.retire()  # no await since the last check: nothing started
            if registry is not None:  # the namespace's totals keep what was counted here
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(send(registry, RegistryActor.retire_executor, last), 2)
            kill_self()
            return

    async def retire(self) -> ExecutorStats:
        """The kill is on its way: what arrives now never starts; the last counters."""
        self.closing = True
        self.code.close()
        self.metrics.flush(self.farm)  # what this actor counted last leaves with it
        return self._snapshot()

    async def statistics(self) -> ExecutorStats:
        """A frozen snapshot of this actor (none once it retires: the registry has it)."""
        await self._refuse_if_closing()
        return self._snapshot()

    def _snapshot(self) -> ExecutorStats:
        ex, rs = self.executor.stats(), self.runner.stats
        return ExecutorStats(
            scope=self.scope,
            pid=os.getpid(),
            rss_bytes=actor_stats("executor", self.name, 0).rss_bytes,
            batches=ex.batches,
            calls=rs.calls,
            in_flight=rs.in_flight,
            aborts=rs.aborts,
            interrupts=rs.interrupts,
            kills=rs.kills,
            workers_lost=rs.lost,
            registry_seq=self.seq,
            contributions=len(self.mirror.disposers),
            scopes=len(self.scopes_seen),
            messages=rs.messages,
            local_messages=rs.local,
            tools=self.farm.tools(),
            scope_calls=self.farm.scopes(),
            environments=self.envs.counts(),
        )

    async def actor_stats(self) -> ActorStats:
        """This actor's identity and footprint (for ``rt.stats().actors``)."""
        return actor_stats("executor", self.name, len(self.scopes_seen))

    async def ping(self) -> int:
        """Liveness: the pid."""
        return os.getpid()

    def _touch(self) -> None:
        self.last_active = time.monotonic()

    async def execute_call(self, spec: wire.CallSpec) -> ToolExecutionResult:
        """One call through the whole pipeline (bodies on workers); ``spec.key`` was reserved."""
        return await self.calls.execute_call(spec)

    async def resolve(
        self, key: str, scope: str | None, model: ModelSelection, aborted: bool, reason: object
    ) -> tuple[int, ...]:
        """Evaluate the scope's ``when`` conditions here; returns the admitted ids."""
        return await self.calls.resolve(key, scope, model, aborted, reason)

    async def environment(self, request: EnvRequest) -> object:
        """One request of a driver's environment handle (see ``EnvService``)."""
        if self.closing:  # it holds no instance (else it would not retire): ask its successor
            raise ExecutorRetiringError(self.name)
        self._touch()
        return await self.envs.handle(request)

    async def close_environments(self) -> int:
        """Close every environment instance here (the namespace is ending)."""
        return await self.envs.close_all()

    async def dispatch_nested(
        self, token_id: str, name: str, arguments: object, call_id: str | None
    ) -> ToolExecutionResult:
        """A nested call from a worker body, for the live execution ``token_id`` names."""
        return await self.calls.dispatch_nested(token_id, name, arguments, call_id)
