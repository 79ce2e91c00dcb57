"""``BatchExecutor``: the in-process executor (asyncio; sync bodies in a thread pool)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, final

from toolray._definition import ToolDefinition
from toolray._json import snapshot_json, thaw_json
from toolray.pipeline._deadline import DEFAULT_KILL_GRACE_MS, check_grace, with_deadline
from toolray.pipeline._dispatch import BodyRunner, inline_runner
from toolray.pipeline._observe import Observer
from toolray.registry._lookup import ToolLookup

from ._run import BatchRun
from ._types import (
    ToolBatchInput,
    ToolBatchResult,
    ToolCallResult,
    ToolModelInput,
    check_cap,
)

__all__ = ("BatchExecutor", "BatchStatistics")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchStatistics:
    """A snapshot of an executor's counters."""

    batches: int
    calls: int
    in_flight: int
    max_in_flight: int
    threads: int
    """Threads currently held by running batches."""


class _Counters:
    def __init__(self) -> None:
        self.batches = self.calls = self.in_flight = self.max_in_flight = self.threads = 0

    def on_start(self, in_flight: int) -> None:
        self.calls += 1
        self.in_flight = in_flight
        self.max_in_flight = max(self.max_in_flight, in_flight)

    def on_settle(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)


class _BatchThreads:
    """One batch's own thread pool, made on first use with ``cap`` threads.

    A cap of 8 runs 8 blocking bodies at once (B-SCHED-7); two batches share no threads.
    """

    def __init__(self, cap: int, counters: _Counters) -> None:
        self._cap = cap
        self._counters = counters
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._cap, thread_name_prefix="toolray-body")
                self._counters.threads += self._cap
            return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._counters.threads -= self._cap
                self._pool = None


@final
class BatchExecutor:
    """Runs whole batches in-process: parallel groups, exclusive barriers, ordered commits.

    A batch with a ``deadline_s`` returns by that deadline + ``kill_grace_ms`` (plus the
    commits): a body still running ``kill_grace_ms`` after the deadline is abandoned —
    in-process it cannot be killed (see ``pipeline/_deadline.py``).

    Example:
        >>> import asyncio
        >>> from toolray import (
        ...     AbortController, ToolBatchInput, ToolCall, ToolRegistry, ToolOutput,
        ...     define_tool, text_block,
        ... )
        >>> reg = ToolRegistry()
        >>> _ = reg.register(define_tool(
        ...     name="echo", description=None, parameters={"text": {"type": "string"}},
        ...     output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        ...     execute=lambda args, ctx: args.get("text", ""), is_concurrency_safe=lambda a: True,
        ... ))
        >>> calls = [ToolCall("c1", "echo", '{"text": "hi"}')]
        >>> batch = ToolBatchInput(calls, AbortController().signal)
        >>> result = asyncio.run(BatchExecutor(reg).execute(batch))
        >>> result.results[0].result.content
        FrozenList([FrozenDict({'type': 'text', 'text': 'hi'})])
    """

    sections: Sequence[Any] = ()

    def __init__(
        self,
        registry: ToolLookup,
        *,
        max_parallel_tool_calls: int = 10,
        runner: BodyRunner | None = None,
        kill_grace_ms: float = DEFAULT_KILL_GRACE_MS,
    ) -> None:
        self.registry = registry
        self.max_parallel_tool_calls = check_cap(max_parallel_tool_calls)
        self._runner = runner
        self.kill_grace_ms = check_grace(kill_grace_ms)
        self._counters = _Counters()

    # ------------------------------------------------------------------ ToolExecutor
    def describe(self, definitions: Sequence[ToolDefinition]) -> ToolModelInput:
        """Model-facing schemas and known names for ``definitions``."""
        schemas = [
            {
                "name": d.name,
                "description": d.description,
                "parameters": thaw_json(snapshot_json(d.parameters)),
            }
            for d in definitions
        ]
        return ToolModelInput(schemas=schemas, known_names=[d.name for d in definitions])

    async def execute(
        self,
        batch: ToolBatchInput,
        *,
        on_commit: Callable[[int, ToolCallResult], None] | None = None,
        trace: list[dict[str, Any]] | None = None,
        observer: Observer | None = None,
    ) -> ToolBatchResult:
        """Run ``batch``: one result per call, in model order; see ``BatchRun``.

        ``on_commit(index, call_result)`` is called as each result commits (model order),
        synthetic results included; streaming uses it. ``trace``, when given, receives one
        span per call (start, settle, commit, mode, worker) and stage/abort instants.
        ``observer`` hears of this batch and its calls, besides the process's observers.
        """
        if not isinstance(batch, ToolBatchInput):
            raise TypeError("execute() takes a ToolBatchInput")
        cap = batch.max_parallel_tool_calls or self.max_parallel_tool_calls
        clock = self.registry.clock
        deadline = with_deadline(
            batch.signal, batch.deadline_s, grace_ms=self.kill_grace_ms, clock=clock
        )
        threads = _BatchThreads(cap, self._counters)
        runner = self._runner or inline_runner(threads.pool, deadline.timer)
        self._counters.batches += 1
        try:
            run = BatchRun(
                self.registry,
                batch,
                cap,
                runner,
                self._counters,
                on_commit,
                trace,
                observer,
                deadline.signal,
            )
            return await run.run()
        finally:
            deadline.release()
            threads.close()

    def stats(self) -> BatchStatistics:
        """A frozen snapshot of this executor's counters."""
        c = self._counters
        return BatchStatistics(
            batches=c.batches,
            calls=c.calls,
            in_flight=c.in_flight,
            max_in_flight=c.max_in_flight,
            threads=c.threads,
        )

    def statistics(self) -> BatchStatistics:
        """Deprecated name of :meth:`stats`."""
        message = "BatchExecutor.statistics() is deprecated: use stats()"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.stats()

    def close(self) -> None:
        """Nothing to release: each batch owns (and shuts down) its own threads."""
