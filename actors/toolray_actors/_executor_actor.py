"""``ExecutorActor``: one per agent scope; mirrors the registry and runs the core scheduler.

It runs the core ``BatchExecutor`` unchanged — pipeline, policies, ordered lane — over a
mirror of the registry, with body dispatch replaced by :class:`RayBodyRunner`. The mirror is
kept current by the registry actor's invalidations (applied on this actor's single loop,
so a call either sees a change entirely or not at all). After an idle TTL the actor
detaches from the registry and exits; the next use creates a fresh one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import psutil

from toolray import (
    AbortController,
    BatchExecutor,
    LogStep,
    MemoryEventLog,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolCallResult,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
)
from toolray.lowlevel import run_pipeline

from ._config import RuntimeConfig
from ._handles import create_pool, executor_name, get_named, kill_self, registry_name
from ._mirror import Mirror, Op
from ._pool import PoolClient, PoolManager
from ._runner import RayBodyRunner

__all__ = ("BatchSpec", "ExecutorActor", "ExecutorStats")

_log = logging.getLogger("toolray")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSpec:
    """A batch as it crosses to the executor actor (the signal stays with the driver)."""

    batch_id: str
    calls: tuple[ToolCall, ...]
    max_parallel_tool_calls: int | None = None
    log: tuple[int, int] | None = None
    aborted: bool = False
    reason: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutorStats:
    """A snapshot of one executor actor."""

    scope: str | None
    pid: int
    rss_bytes: int
    batches: int
    calls: int
    in_flight: int
    aborts: int
    interrupts: int
    kills: int
    workers_lost: int
    registry_seq: int
    contributions: int


def _placement_key(placement: Any) -> str:
    if placement is None:
        return "default"
    if placement.pool:
        return str(placement.pool)
    parts = [placement.num_cpus, placement.num_gpus, sorted((placement.resources or {}).items())]
    return "p" + str(abs(hash(repr(parts))))


class ExecutorActor:
    """Runs batches for one scope."""

    def __init__(self, scope: str | None, namespace: str, config: dict[str, Any]) -> None:
        self.scope = scope
        self.namespace = namespace
        self.config = RuntimeConfig.model_validate(config)
        self.seq = -1
        self.batches: dict[str, AbortController] = {}
        self.pools: dict[str, PoolClient] = {}
        self.runner = RayBodyRunner(
            self._pool_for,
            self._key_of,
            cancel_grace_ms=self.config.cancel_grace_ms,
            kill_grace_ms=self.config.kill_grace_ms,
        )
        self._rebuild([])
        self.last_active = time.monotonic()
        self._attached = False
        self._reaper: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ the mirror
    def _rebuild(self, ops: list[Op]) -> None:
        self.mirror = Mirror(ToolRegistry())
        for op in ops:
            self.mirror.apply(op)
        self.executor = BatchExecutor(
            self.mirror.registry,
            max_parallel_tool_calls=self.config.max_parallel_tool_calls,
            runner=self.runner,
        )

    def _key_of(self, definition: Any) -> tuple[str, bytes] | None:
        return self.mirror.key_of(definition)

    def _pool_for(self, placement: Any) -> PoolClient:
        key = _placement_key(placement)
        client = self.pools.get(key)
        if client is None:
            pool = self.config.pool
            options: dict[str, Any] = {"num_cpus": pool.num_cpus}
            if pool.resources:
                options["resources"] = dict(pool.resources)
            if pool.runtime_env:
                options["runtime_env"] = pool.runtime_env
            if placement is not None:
                for attr in ("num_cpus", "num_gpus", "resources", "runtime_env"):
                    value = getattr(placement, attr)
                    if value is not None:
                        options[attr] = value
            manager = create_pool(
                PoolManager,
                key,
                self.namespace,
                self.config.detached,
                pool.size,
                pool.spare,
                options,
                pool.max_concurrency,
            )
            client = self.pools[key] = PoolClient(manager)
        return client

    async def ready(self) -> dict[str, Any]:
        """Attach to the registry (once) and mirror its state."""
        if not self._attached:
            registry = get_named(registry_name(), self.namespace)
            if registry is None:
                raise RuntimeError("the toolray registry actor is not running")
            seq, ops = await registry.attach_executor.remote(executor_name(self.scope))
            if not self._attached:
                self._rebuild(ops)
                self.seq = seq
                self._attached = True
                self._reaper = asyncio.ensure_future(self._reap())
            pool = self._pool_for(None)
            await pool.manager.ready.remote()
        self.last_active = time.monotonic()
        return {"scope": self.scope, "pid": os.getpid(), "seq": self.seq}

    async def invalidate(self, seq: int, delta: tuple[Any, ...]) -> int:
        """Apply one registry change (or resync on a gap); returns the applied sequence."""
        if seq <= self.seq:
            return self.seq
        try:
            if seq != self.seq + 1:
                raise LookupError("sequence gap")
            if delta[0] == "add":
                self.mirror.apply(delta[1])
            else:
                self.mirror.remove(delta[1])
            self.seq = seq
        except Exception:
            await self._resync()
        return self.seq

    async def _resync(self) -> None:
        registry = get_named(registry_name(), self.namespace)
        if registry is None:
            return
        seq, ops = await registry.snapshot.remote()
        self._rebuild(ops)
        self.seq = seq

    # ------------------------------------------------------------------ batches
    async def reserve(self, batch_id: str) -> bool:
        """Claim this actor for a batch about to come (an idle reap now waits for it)."""
        self.batches.setdefault(batch_id, AbortController())
        self.last_active = time.monotonic()
        return True

    def _batch(self, spec: BatchSpec) -> tuple[ToolBatchInput, MemoryEventLog | None]:
        ctrl = self.batches.setdefault(spec.batch_id, AbortController())
        if spec.aborted:
            ctrl.abort(spec.reason)
        log = MemoryEventLog() if spec.log is not None else None
        step = LogStep(spec.log[0], spec.log[1], log) if spec.log and log else None
        batch = ToolBatchInput(
            spec.calls,
            ctrl.signal,
            max_parallel_tool_calls=spec.max_parallel_tool_calls,
            scope=self.scope,
            log=step,
        )
        return batch, log

    async def execute_batch(
        self, spec: BatchSpec
    ) -> tuple[ToolBatchResult, list[Any], list[dict[str, Any]]]:
        """Run one batch; returns the result, its log events and its trace."""
        self.last_active = time.monotonic()
        batch, log = self._batch(spec)
        trace: list[dict[str, Any]] = []
        try:
            result = await self.executor.execute(batch, trace=trace)
        finally:
            self.batches.pop(spec.batch_id, None)
            self.last_active = time.monotonic()
        return result, (log.events if log else []), trace

    async def stream_batch(self, spec: BatchSpec) -> AsyncIterator[tuple[Any, ...]]:
        """Yield ``("item", index, ToolCallResult)`` as each result commits, then the end."""
        self.last_active = time.monotonic()
        batch, log = self._batch(spec)
        queue: asyncio.Queue[tuple[int, ToolCallResult]] = asyncio.Queue()
        trace: list[dict[str, Any]] = []
        task = asyncio.ensure_future(
            self.executor.execute(
                batch, on_commit=lambda i, r: queue.put_nowait((i, r)), trace=trace
            )
        )
        try:
            while not (task.done() and queue.empty()):
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    index, item = getter.result()
                    yield ("item", index, item)
                else:
                    getter.cancel()
            result = task.result()
            yield ("end", result, log.events if log else [], trace)
        finally:
            self.batches.pop(spec.batch_id, None)
            self.last_active = time.monotonic()

    async def cancel(self, batch_id: str, reason: Any = None) -> bool:
        """Abort a running batch (the driver's signal fired)."""
        ctrl = self.batches.get(batch_id)
        if ctrl is None:
            return False
        ctrl.abort(reason)
        return True

    async def execute(
        self, call: ToolCall, reason: Any = None, aborted: bool = False
    ) -> ToolExecutionResult:
        """One call through the whole pipeline (bodies on workers)."""
        from toolray import parse_arguments

        self.last_active = time.monotonic()
        ctrl = AbortController()
        if aborted:
            ctrl.abort(reason)
        inp = ToolExecutionInput(
            call.id, call.name, parse_arguments(call.arguments), ctrl.signal, scope=self.scope
        )
        return await run_pipeline(self.mirror.registry, inp, self.runner)

    # ------------------------------------------------------------------ lifecycle
    def _idle(self) -> bool:
        ttl = self.config.executor_idle_ttl_s
        return (
            not self.batches
            and self.runner.stats.in_flight == 0
            and time.monotonic() - self.last_active >= ttl
        )

    async def _reap(self) -> None:
        ttl = self.config.executor_idle_ttl_s
        name = executor_name(self.scope)
        while True:
            await asyncio.sleep(min(ttl / 4, 30.0))
            if not self._idle():
                continue
            registry = get_named(registry_name(), self.namespace)
            if registry is not None:
                await registry.detach_executor.remote(name)
            if not self._idle():  # work arrived while detaching: stay, and mirror again
                if registry is not None:
                    seq, ops = await registry.attach_executor.remote(name)
                    self._rebuild(ops)
                    self.seq = seq
                continue
            kill_self()  # no await since the last check: nothing can start in between
            return

    async def statistics(self) -> ExecutorStats:
        """A frozen snapshot of this actor."""
        ex, rs = self.executor.statistics(), self.runner.stats
        return ExecutorStats(
            scope=self.scope,
            pid=os.getpid(),
            rss_bytes=psutil.Process().memory_info().rss,
            batches=ex.batches,
            calls=rs.calls,
            in_flight=rs.in_flight,
            aborts=rs.aborts,
            interrupts=rs.interrupts,
            kills=rs.kills,
            workers_lost=rs.lost,
            registry_seq=self.seq,
            contributions=len(self.mirror.disposers),
        )

    async def ping(self) -> int:
        """Liveness: the pid."""
        return os.getpid()
