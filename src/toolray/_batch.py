"""``BatchExecutor``: the in-process executor (asyncio; sync bodies in a thread pool)."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from ._batch_run import BatchRun
from ._batch_types import (
    ToolBatchInput,
    ToolBatchResult,
    ToolCallResult,
    ToolModelInput,
    check_cap,
)
from ._definition import ToolDefinition
from ._dispatch import BodyRunner
from ._execution import ToolRunContext
from ._json import snapshot_json, thaw_json
from ._layers import Entry

if TYPE_CHECKING:
    from ._pipeline import Call
    from ._registry import ToolRegistry

__all__ = ("BatchExecutor", "BatchStatistics")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchStatistics:
    """A snapshot of an executor's counters."""

    batches: int
    calls: int
    in_flight: int
    max_in_flight: int
    threads: int


class _Counters:
    def __init__(self) -> None:
        self.batches = self.calls = self.in_flight = self.max_in_flight = 0

    def on_start(self, in_flight: int) -> None:
        self.calls += 1
        self.in_flight = in_flight
        self.max_in_flight = max(self.max_in_flight, in_flight)

    def on_settle(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)


@final
class BatchExecutor:
    """Runs whole batches in-process: parallel groups, exclusive barriers, ordered commits.

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
        >>> batch = ToolBatchInput([ToolCall("c1", "echo", '{"text": "hi"}')], AbortController().signal)
        >>> result = asyncio.run(BatchExecutor(reg).execute(batch))
        >>> result.results[0].result.content
        FrozenList([FrozenDict({'type': 'text', 'text': 'hi'})])
    """

    sections: Sequence[Any] = ()

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        max_parallel_tool_calls: int = 10,
        runner: BodyRunner | None = None,
    ) -> None:
        self.registry = registry
        self.max_parallel_tool_calls = check_cap(max_parallel_tool_calls)
        self._runner = runner
        self._pool: ThreadPoolExecutor | None = None
        self._pool_size = 0
        self._pool_lock = threading.Lock()
        self._counters = _Counters()

    # ------------------------------------------------------------------ threads
    def _threads(self, cap: int) -> ThreadPoolExecutor:
        """A pool with at least ``cap`` threads, so ``cap`` blocking bodies really overlap."""
        with self._pool_lock:
            if self._pool is None or self._pool_size < cap:
                old = self._pool
                self._pool_size = max(cap, 4)
                self._pool = ThreadPoolExecutor(self._pool_size, thread_name_prefix="toolray")
                if old is not None:
                    old.shutdown(wait=False)
            return self._pool

    def _inline_runner(self, cap: int) -> BodyRunner:
        pool = self._threads(cap)

        async def run(call: Call, entry: Entry, ctx: ToolRunContext) -> Any:
            fn = entry.definition.execute
            if inspect.iscoroutinefunction(fn):
                return await fn(ctx.arguments, ctx)
            loop = asyncio.get_running_loop()
            value = await loop.run_in_executor(pool, functools.partial(fn, ctx.arguments, ctx))
            if inspect.isawaitable(value):
                value = await value
            return value

        return run

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
    ) -> ToolBatchResult:
        """Run ``batch``: one result per call, in model order; see ``BatchRun``.

        ``on_commit(index, call_result)`` is called as each result commits (model order),
        synthetic results included; streaming uses it.
        """
        if not isinstance(batch, ToolBatchInput):
            raise TypeError("execute() takes a ToolBatchInput")
        cap = batch.max_parallel_tool_calls or self.max_parallel_tool_calls
        runner = self._runner or self._inline_runner(cap)
        self._counters.batches += 1
        run = BatchRun(self.registry, batch, cap, runner, self._counters, on_commit)
        return await run.run()

    def statistics(self) -> BatchStatistics:
        """A frozen snapshot of this executor's counters."""
        c = self._counters
        return BatchStatistics(
            batches=c.batches,
            calls=c.calls,
            in_flight=c.in_flight,
            max_in_flight=c.max_in_flight,
            threads=self._pool_size,
        )

    def close(self) -> None:
        """Release the thread pool."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None
                self._pool_size = 0
