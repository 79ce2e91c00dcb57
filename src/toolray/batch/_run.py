"""One batch run: its inputs, its log and trace, on the scheduler's closed lane.

The scheduling — stages, the cap, the ordered lane, abort and failure handling — is the
scheduler's (:mod:`toolray.scheduler._engine`); a batch adds what its hooks write: the
``tool/call`` record at each start and the ``tool/result`` record at each commit, in model
order (B-SCHED-11/12, B-ORDER), the accepted contexts and the conclusion, the trace's spans
and stage instants, and — once the scheduler saw the abort — a synthetic
``ABORTED_BEFORE_DISPATCH`` pair for every call that never started (B-ABORT; after the
batch's deadline passed, ``DEADLINE_EXCEEDED``). A scheduler
failure rejects the batch with ``ToolBatchExecutionError`` carrying what committed (B-ERR).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from toolray._arguments import logged_arguments, parse_arguments
from toolray._content import UserMessage
from toolray._execution import ExecutionToken, ToolExecutionInput
from toolray._normalize import aborted, materialize, past_deadline
from toolray._outcomes import ToolExecutionFailure, ToolExecutionResult
from toolray._signals import AbortSignal
from toolray.errors import ToolBatchExecutionError
from toolray.pipeline._call import Call
from toolray.pipeline._dispatch import BodyRunner
from toolray.pipeline._finish import log_failure
from toolray.pipeline._observe import (
    BatchStart,
    Observer,
    end_batch,
    end_call,
    start_batch,
    start_call,
)
from toolray.registry._lookup import ToolLookup
from toolray.scheduler._engine import Hooks, Scheduler
from toolray.scheduler._plan import ExecutionMode, Stage

from ._types import ToolBatchInput, ToolBatchResult, ToolCall, ToolCallResult

__all__ = ("BatchRun",)


class BatchRun(Hooks):
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
        observer: Observer | None = None,
        signal: AbortSignal | None = None,
    ) -> None:
        self.signal = signal if signal is not None else batch.signal
        """What the calls run under: the batch's signal (with its deadline, if it has one)."""
        self.on_commit = on_commit
        self.trace = trace
        self._spans: dict[int, dict[str, Any]] = {}
        self._now = registry.clock.now
        self._t0 = self._now()
        self.batch = batch
        self.stats = stats
        self.calls: tuple[ToolCall, ...] = tuple(batch.calls)
        inputs = [
            ToolExecutionInput(
                c.id,
                c.name,
                parse_arguments(c.arguments),
                self.signal,
                scope=batch.scope,
                tool_set=batch.tool_set,
                log=batch.log,
            )
            for c in self.calls
        ]
        self.results: list[ToolExecutionResult | None] = [None] * len(self.calls)
        self.contexts: list[UserMessage] = []
        self.concluded = False
        self.inputs = inputs
        self.observed = start_batch(
            BatchStart(scope=batch.scope, calls=len(inputs), backend="in_process"),
            observer,
        )
        self.scheduler = Scheduler(
            registry, self.signal, cap, runner, self, calls=inputs, within=self.observed
        )

    # ------------------------------------------------------------------ the log
    def _log(self, event: dict[str, Any]) -> None:
        log = self.batch.log
        if log is not None:
            log.sink.append({"turn": log.turn, "step": log.step, **event})

    def _log_call(self, k: int) -> None:
        if self.batch.log is None:  # nothing records it: no JSON text to make
            return
        call = self.calls[k]
        raw = call.arguments  # the model's text; a parsed mapping is logged as its JSON text
        arguments = raw if type(raw) is str else logged_arguments(raw)
        event = {"type": "tool/call", "callId": call.id, "name": call.name, "arguments": arguments}
        self._log(event)

    def _record(self, k: int, result: ToolExecutionResult) -> None:
        self.results[k] = result
        if self.batch.log is not None:
            wire = result.to_wire()
            self._log({"type": "tool/result", "callId": self.calls[k].id, "result": wire})
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

    # ------------------------------------------------------------------ the hooks
    def chainable(self) -> bool:
        """No log or observer (but counters) sees when this batch's calls start and commit.

        A trace may: its spans of a chained batch carry the runner's ``chain`` note.
        """
        observed = self.observed
        return self.batch.log is None and (observed is None or observed.counts_only)

    def stage(self, stage: Stage) -> None:
        """A stage instant in the trace."""
        self._note({"type": "stage", "kind": stage.kind, "start": stage.start})

    def started(self, index: int, mode: ExecutionMode) -> None:
        """The call's ``tool/call`` record, then its span."""
        self._log_call(index)
        if self.trace is not None:
            self._span(index, mode)

    def dispatched(self, index: int, in_flight: int) -> None:
        """Counted as started by the executor."""
        self.stats.on_start(in_flight)

    def released(self, index: int) -> None:
        """Counted as settled by the executor."""
        self.stats.on_settle()

    def settled(self, index: int, call: Call) -> None:
        """The span's settle time and the runner's notes."""
        if self.trace is not None:
            self._spans[index].update(settled=self._elapsed(), **call.notes)
            self._relative(self._spans[index].get("subCalls"))

    async def committed(self, index: int, call: Call, result: ToolExecutionResult) -> None:
        """The result, its contexts and the conclusion, in model order."""
        self._record(index, result)
        self.contexts.extend(result.additional_contexts)
        self.concluded = self.concluded or result.concludes_turn

    def skipped(self, start: int, stop: int) -> None:
        """Synthetic pairs for every call never started.

        No pipeline runs; observers and the log see each one start and end at once.
        """
        self._note({"type": "abort", "index": start})
        for k in range(start, stop):
            self._log_call(k)
            result = materialize(past_deadline(aborted(False), self.signal))
            assert isinstance(result, ToolExecutionFailure)
            if self.observed is not None:
                observed = start_call(self.inputs[k], ExecutionToken(), self.observed)
                if observed is not None:
                    end_call(observed, result)
            log_failure(self.inputs[k], result)
            self._record(k, result)

    async def run(self) -> ToolBatchResult:
        """Run every call; see the module docstring."""
        error: BaseException | None = None
        try:
            await self.scheduler.run()
        except asyncio.CancelledError as exc:
            error = exc
            raise
        except Exception as exc:
            error = exc
            raise ToolBatchExecutionError(
                f"tool batch failed: {exc}",
                results=self._committed_results(),
                additional_contexts=tuple(self.contexts),
            ) from exc
        finally:
            sync = getattr(self.batch.log.sink, "sync", None) if self.batch.log else None
            if sync is not None:
                sync()
            end_batch(self.observed, error)
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
