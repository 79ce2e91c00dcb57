"""One batch run: the rolling pool, the ordered lane, abort and failure handling.

Only the dispatch stage (around-dispatch wrappers + body) runs in tasks; everything else —
``tool/call`` appends, ``prepare``, commits (post-execute, finish, ``tool/result`` appends,
context acceptance) — runs here, on one lane, in model order (B-SCHED-11/12). Abort is a
flag sampled at the checkpoints (after each start + commit, after each settle + commit);
started work is always drained and committed, and every unstarted call gets a synthetic
``ABORTED_BEFORE_DISPATCH`` pair (B-ABORT). A scheduler failure stops new dispatches, drains
the started ones and raises ``ToolBatchExecutionError`` (B-ERR).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from typing import Any

from toolray._arguments import logged_arguments, parse_arguments
from toolray._content import UserMessage
from toolray._execution import ToolExecutionInput
from toolray._normalize import aborted, materialize
from toolray._outcomes import ToolExecutionResult
from toolray.errors import ToolBatchExecutionError
from toolray.pipeline._call import Call
from toolray.pipeline._dispatch import BodyRunner
from toolray.pipeline._stages import complete, dispatch, prepare
from toolray.registry._lookup import ToolLookup
from toolray.scheduler._plan import next_stage

from ._types import ToolBatchInput, ToolBatchResult, ToolCall, ToolCallResult

__all__ = ("BatchRun",)


_YIELD_EVERY = 16


class BatchRun:
    """Runs one :class:`ToolBatchInput` to a :class:`ToolBatchResult`."""

    def __init__(
        self,
        registry: ToolLookup,
        batch: ToolBatchInput,
        cap: int,
        runner: BodyRunner,
        stats: Any,
        on_commit: Callable[[int, ToolCallResult], None] | None = None,
        trace: list[dict[str, Any]] | None = None,
    ) -> None:
        self.on_commit = on_commit
        self.trace = trace
        self._spans: dict[int, dict[str, Any]] = {}
        self._now = registry.clock.now
        self._t0 = self._now()
        self.registry = registry
        self.batch = batch
        self.cap = cap
        self.runner = runner
        self.stats = stats
        self.calls: tuple[ToolCall, ...] = tuple(batch.calls)
        self.inputs = [
            ToolExecutionInput(
                c.id,
                c.name,
                parse_arguments(c.arguments),
                batch.signal,
                scope=batch.scope,
                tool_set=batch.tool_set,
                log=batch.log,
            )
            for c in self.calls
        ]
        self.results: list[ToolExecutionResult | None] = [None] * len(self.calls)
        self.contexts: list[UserMessage] = []
        self.concluded = False
        self.in_flight: dict[asyncio.Task[Call], int] = {}
        # settled dispatches, in settlement order: no O(in-flight) asyncio.wait per settle
        self._settled: deque[asyncio.Task[Call]] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.ready: dict[int, Call] = {}
        self.committed = 0
        self.failure: BaseException | None = None

    # ------------------------------------------------------------------ the log
    def _log(self, event: dict[str, Any]) -> None:
        log = self.batch.log
        if log is not None:
            log.sink.append({"turn": log.turn, "step": log.step, **event})

    def _log_call(self, k: int) -> None:
        call = self.calls[k]
        raw = call.arguments  # the model's text; a parsed mapping is logged as its JSON text
        arguments = raw if type(raw) is str else logged_arguments(raw)
        event = {"type": "tool/call", "callId": call.id, "name": call.name, "arguments": arguments}
        self._log(event)

    def _record(self, k: int, result: ToolExecutionResult) -> None:
        self.results[k] = result
        self._log({"type": "tool/result", "callId": self.calls[k].id, "result": result.to_wire()})
        if self.trace is not None:
            span = self._spans.get(k) or self._span(k, "skipped")
            span["committed"] = self._elapsed()
            span["isError"] = result.is_error
            info = getattr(getattr(result, "error", None), "info", None)
            span["code"] = info.code if info is not None else None
        if self.on_commit is not None:
            self.on_commit(k, ToolCallResult(self.calls[k].id, result))

    # ------------------------------------------------------------------ the trace
    def _elapsed(self) -> float:
        return round(self._now() - self._t0, 6)

    def _span(self, k: int, mode: str) -> dict[str, Any]:
        span = {
            "type": "call",
            "index": k,
            "callId": self.calls[k].id,
            "name": self.calls[k].name,
            "mode": mode,
            "started": self._elapsed(),
        }
        self._spans[k] = span
        if self.trace is not None:
            self.trace.append(span)
        return span

    def _relative(self, spans: list[dict[str, Any]] | None) -> None:
        """A run_code call's sub-call spans: clock times → seconds since the batch started."""
        for span in spans or ():
            for key in ("started", "settled", "committed"):
                if key in span:
                    span[key] = round(span[key] - self._t0, 6)

    def _note(self, event: dict[str, Any]) -> None:
        if self.trace is not None:
            self.trace.append({**event, "time": self._elapsed()})

    # ------------------------------------------------------------------ the lane
    async def _start(self, k: int, mode: str) -> None:
        self._log_call(k)
        if self.trace is not None:
            self._span(k, mode)
        call = await prepare(self.registry, self.inputs[k])
        if call.step == "dispatch":
            task = asyncio.ensure_future(dispatch(call, self.runner))
            self.in_flight[task] = k
            task.add_done_callback(self._on_settled)
            self.stats.on_start(len(self.in_flight))
        else:
            self.ready[k] = call

    async def _commit_ready(self) -> None:
        while self.committed in self.ready:
            k = self.committed
            result = await complete(self.ready.pop(k))
            self._record(k, result)
            self.contexts.extend(result.additional_contexts)
            self.concluded = self.concluded or result.concludes_turn
            self.committed += 1

    def _skip(self, start: int) -> None:
        """Synthetic pairs for every call from ``start`` on (no pipeline, no observers)."""
        self._note({"type": "abort", "index": start})
        for k in range(start, len(self.calls)):
            self._log_call(k)
            self._record(k, materialize(aborted(False)))

    # ------------------------------------------------------------------ groups
    async def _run_group(self, start: int) -> tuple[int, bool]:
        """Run one stage; return ``(next index, aborted)``."""
        signal = self.batch.signal
        head = self.registry.execution_mode(self.inputs[start])
        stage = next_stage(start, len(self.calls), head)
        stop, next_start, was_aborted = stage.stop, start, signal.aborted
        self.committed = start
        self._note({"type": "stage", "kind": stage.kind, "start": start})

        async def fill() -> None:
            nonlocal stop, next_start, was_aborted
            while not was_aborted and next_start < stop and len(self.in_flight) < self.cap:
                if next_start > start and stage.kind == "parallel":
                    mode = self.registry.execution_mode(self.inputs[next_start])
                    if mode != "parallel":
                        stop = next_start  # it becomes the next barrier, after the drain
                        break
                await self._start(next_start, stage.kind)
                next_start += 1
                if (next_start - start) % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)  # let settled calls commit during a wide fan-out
                await self._commit_ready()
                was_aborted = was_aborted or signal.aborted

        await fill()
        while self.in_flight:
            for task in await self._next_settled():
                k = self.in_flight.pop(task)
                self.stats.on_settle()
                if task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
                call = self.ready[k] = task.result()
                if self.trace is not None:
                    self._spans[k].update(settled=self._elapsed(), **call.notes)
                    self._relative(self._spans[k].get("subCalls"))
            await self._commit_ready()
            was_aborted = was_aborted or signal.aborted
            await fill()
        return next_start, was_aborted

    def _on_settled(self, task: asyncio.Task[Call]) -> None:
        self._settled.append(task)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _next_settled(self) -> list[asyncio.Task[Call]]:
        """Wait until at least one dispatch settles; return every one that has."""
        while not self._settled:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        self._waiter = None
        done = list(self._settled)
        self._settled.clear()
        return done

    async def _drain(self) -> None:
        """Wait for every started dispatch (failures while draining are ignored)."""
        while self.in_flight:
            for task in await self._next_settled():
                if self.in_flight.pop(task, None) is not None:
                    self.stats.on_settle()
                if not task.cancelled():
                    task.exception()

    async def run(self) -> ToolBatchResult:
        """Run every stage; see the module docstring."""
        signal = self.batch.signal
        i = 0
        try:
            while i < len(self.calls):
                if signal.aborted:
                    self._skip(i)
                    break
                i, was_aborted = await self._run_group(i)
                if was_aborted:
                    self._skip(i)
                    break
        except asyncio.CancelledError:
            for task in self.in_flight:
                task.cancel()
            await self._drain()
            raise
        except Exception as exc:
            await self._drain()
            raise ToolBatchExecutionError(
                f"tool batch failed: {exc}",
                results=self._committed_results(),
                additional_contexts=tuple(self.contexts),
            ) from exc
        finally:
            sync = getattr(self.batch.log.sink, "sync", None) if self.batch.log else None
            if sync is not None:
                sync()
        return ToolBatchResult(
            results=self._committed_results(),
            additional_contexts=tuple(self.contexts),
            concluded=self.concluded,
        )

    def _committed_results(self) -> tuple[ToolCallResult, ...]:
        return tuple(
            ToolCallResult(call.id, result)
            for call, result in zip(self.calls, self.results, strict=True)
            if result is not None
        )
