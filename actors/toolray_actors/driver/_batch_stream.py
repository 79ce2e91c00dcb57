"""The driver's side of a streamed batch: results and log records as they commit.

``Accumulator`` receives the executor's chunks (see ``ExecutorActor.run_batch``): records
go to the batch's log sink at once, results fill their slots, the span records of a traced
batch go to ``on_span``. If the executor is lost, it
completes the batch itself — every call without a committed result fails with
``EXECUTOR_LOST`` — and appends the synthetic ``tool/call`` / ``tool/result`` records the
log is missing, so the log and the result stay one record pair per call.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from toolray import ExecutorLostError, ToolBatchInput, ToolBatchResult, ToolCallResult
from toolray.lowlevel import failure_from
from toolray_actors._tracing import SpanRecord

__all__ = ("Accumulator",)

_log = logging.getLogger("toolray")


class Accumulator:
    """One batch's results and records, as they arrive."""

    def __init__(
        self,
        batch: ToolBatchInput,
        *,
        log: bool = True,
        on_span: Callable[[SpanRecord], None] | None = None,
        scope: str | None = None,
    ) -> None:
        self.batch = batch
        self.scope = scope if scope is not None else batch.scope
        self.on_span = on_span
        self.calls = tuple(batch.calls)
        self.results: list[ToolCallResult | None] = [None] * len(self.calls)
        self.logged: set[str] = set()
        self.log = batch.log if log else None
        self.contexts: tuple[Any, ...] = ()
        self.concluded = False
        self.done = False

    def _append(self, event: dict[str, Any]) -> None:
        if self.log is not None:
            self.log.sink.append(event)

    def take(self, chunk: list[Any]) -> Iterator[tuple[int, ToolCallResult]]:
        """Apply one chunk; yields the results it committed."""
        for entry in chunk:
            if isinstance(entry, SpanRecord):  # a traced call ended (nested ones too)
                if self.on_span is not None:
                    self.on_span(entry)
                continue
            if entry[0] == "e":
                event = entry[1]
                if event.get("type") == "tool/call":
                    self.logged.add(event.get("callId"))
                self._append(event)
            else:
                _, index, result = entry
                self.results[index] = result
                yield index, result

    def finish(self, contexts: tuple[Any, ...], concluded: bool) -> None:
        """The executor's end record: the batch completed."""
        self.contexts = tuple(contexts)
        self.concluded = bool(concluded)
        self.done = True

    def lose(self, err: BaseException | None) -> Iterator[tuple[int, ToolCallResult]]:
        """The executor is gone: fail every uncommitted call with ``EXECUTOR_LOST``."""
        cause = f" ({type(err).__name__})" if err is not None else ""
        message = (
            f"the executor actor running this batch was lost{cause} before this call's "
            "result committed; the call was not re-run"
        )
        log = self.log
        for k, call in enumerate(self.calls):
            if self.results[k] is not None:
                continue
            failure = failure_from(ExecutorLostError(message))
            _log.warning(
                'tool "%s" (%s) failed [EXECUTOR_LOST]: %s',
                call.name,
                call.id,
                message,
                extra={"call_id": call.id, "tool": call.name, "scope": self.scope},
            )
            if log is not None:
                head = {"turn": log.turn, "step": log.step}
                if call.id not in self.logged:
                    self._append(
                        {
                            **head,
                            "type": "tool/call",
                            "callId": call.id,
                            "name": call.name,
                            "arguments": call.arguments,
                        }
                    )
                self._append(
                    {**head, "type": "tool/result", "callId": call.id, "result": failure.to_wire()}
                )
            self.results[k] = ToolCallResult(call.id, failure)
            yield k, self.results[k]  # type: ignore[misc]
        self.contexts = tuple(
            ctx for r in self.results if r is not None for ctx in r.result.additional_contexts
        )
        self.done = True

    def sync(self) -> None:
        """Flush the log sink (a durable log syncs its file)."""
        if self.log is None:
            return
        sync = getattr(self.log.sink, "sync", None)
        if sync is not None:
            sync()

    def result(self) -> ToolBatchResult:
        """The batch result (every slot is filled once the stream ended)."""
        results = tuple(r for r in self.results if r is not None)
        return ToolBatchResult(
            results=results, additional_contexts=self.contexts, concluded=self.concluded
        )
