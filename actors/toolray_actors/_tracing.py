"""Spans of a batch that runs in an executor actor: made there, recorded by the driver.

The driver that runs a batch with observers attached (``toolray.otel.instrument()``)
starts the batch's span itself and sends its W3C ``traceparent`` with the batch. In the
executor actor a :class:`SpanRecorder` observes that batch: each call — nested ones and
Code Mode sub-calls included — gets a span id there, a child of its batch's or its
caller's, which travels with the call to its worker (the body runs in it); when the call
ends, a :class:`SpanRecord` joins the batch's stream. The driver's :class:`DriverTrace`
hands each record to its observers after the fact, under the span id the body already
named as its parent; a call whose record never came (its executor was lost) is recorded
with the outcome the driver gave it.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, final

from toolray import ToolCallResult
from toolray.lowlevel import (
    BatchStart,
    CallEnd,
    CallStart,
    Observation,
    TraceParent,
    end_batch,
    outcome_of,
    record_call,
    start_batch,
)

__all__ = ("DriverTrace", "SpanRecord", "SpanRecorder")


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanRecord:
    """One ended call of a traced batch, as it crosses from the executor to the driver."""

    call_id: str
    name: str
    scope: str | None
    nested: bool
    span: TraceParent
    parent: TraceParent
    started_ns: int
    ended_ns: int
    outcome: str
    message: str | None = None


@dataclass(eq=False, slots=True)
class _Open:
    """A call the recorder has seen start (its handle: ``trace`` is the body's span)."""

    call: CallStart
    trace: TraceParent
    parent: TraceParent
    started_ns: int


@dataclass(eq=False, slots=True)
class _Batch:
    trace: TraceParent


@final
class SpanRecorder:
    """The executor's observer of one traced batch: span ids now, records at each end."""

    def __init__(self, parent: TraceParent, emit: Callable[[SpanRecord], None]) -> None:
        self._parent = parent
        self._emit = emit

    def batch_started(self, batch: BatchStart) -> _Batch:
        """The driver's batch span is the parent of the batch's calls."""
        return _Batch(self._parent)

    def batch_ended(self, batch: _Batch, error: BaseException | None) -> None:
        """The driver ends the batch's span."""

    def call_started(self, call: CallStart, parent: _Batch | _Open | None) -> _Open:
        """A new span id, a child of the batch's span or the caller's."""
        above = parent.trace if parent is not None else self._parent
        return _Open(call, above.child(), above, time.time_ns())

    def call_ended(self, call: _Open, end: CallEnd) -> None:
        """The call's record joins the batch's stream."""
        self._emit(
            SpanRecord(
                call_id=call.call.call_id,
                name=call.call.name,
                scope=call.call.scope,
                nested=call.call.nested,
                span=call.trace,
                parent=call.parent,
                started_ns=call.started_ns,
                ended_ns=time.time_ns(),
                outcome=end.outcome,
                message=end.message,
            )
        )


class DriverTrace:
    """The driver's side of one batch run on Ray: its observation and its calls' records."""

    def __init__(self, observed: Observation, calls: Sequence[Any]) -> None:
        self._observed = observed
        self._calls = tuple(calls)
        self._started_ns = time.time_ns()
        self._recorded: set[str] = set()
        trace = observed.trace
        # observers that do not trace still hear of every call: the executor needs a parent
        self.parent = trace or TraceParent(secrets.randbits(128) | 1, secrets.randbits(64) | 1, 0)

    @classmethod
    def start(cls, scope: str | None, calls: Sequence[Any]) -> DriverTrace | None:
        """Observe a batch about to run on Ray, or ``None`` when nobody observes."""
        observed = start_batch(BatchStart(scope=scope, calls=len(calls), backend="ray"))
        return cls(observed, calls) if observed is not None else None

    def record(self, record: SpanRecord) -> None:
        """A call's record from the executor: told to the observers."""
        if not record.nested:
            self._recorded.add(record.call_id)
        start = CallStart(
            call_id=record.call_id,
            name=record.name,
            scope=record.scope,
            nested=record.nested,
            started_ns=record.started_ns,
            span=record.span,
            parent_span=record.parent,
        )
        end = CallEnd(outcome=record.outcome, message=record.message, ended_ns=record.ended_ns)
        record_call(self._observed, start, end)

    def finish(
        self, scope: str | None, results: Sequence[ToolCallResult | None], error: Any = None
    ) -> None:
        """Record the calls no record came for (with the driver's outcome), end the batch."""
        for call, committed in zip(self._calls, results, strict=True):
            if call.id in self._recorded or committed is None:
                continue
            result = committed.result
            start = CallStart(
                call_id=call.id,
                name=call.name,
                scope=scope,
                started_ns=self._started_ns,
                span=self.parent.child(),
                parent_span=self.parent,
            )
            message = result.error.message if result.is_error else None
            record_call(self._observed, start, CallEnd(outcome=outcome_of(result), message=message))
        end_batch(self._observed, error)
