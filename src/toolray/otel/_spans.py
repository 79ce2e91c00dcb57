"""``SpanObserver``: batches and calls as OpenTelemetry spans (the GenAI conventions).

One ``toolray batch`` span per batch and one ``execute_tool <name>`` span per call, a child
of its batch's span (a nested call: of its caller's). A call that ran in this process is a
live span, current around its body; a call that ran in a Ray executor actor is recorded
when its record reaches the driver, with the times and the span id it ran under — the id
its body's own spans already name as their parent, on whichever worker they ran.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from typing import Any, final

from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, Status, StatusCode, TraceFlags

from toolray.lowlevel import BatchStart, CallEnd, CallStart, EnvironmentEvent, TraceParent

__all__ = ("SpanObserver",)

_preset: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "toolray_preset_span_id", default=None
)


@final
class _PresetIds:
    """The tracer's id generator, except for a span recorded under an id already in use."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def generate_span_id(self) -> int:
        preset = _preset.get()
        return preset if preset is not None else int(self.inner.generate_span_id())

    def generate_trace_id(self) -> int:
        return int(self.inner.generate_trace_id())

    def is_trace_id_random(self) -> bool:
        return bool(getattr(self.inner, "is_trace_id_random", lambda: False)())


def _install_preset_ids(tracer: Any) -> bool:
    """Let ``tracer`` (an SDK tracer) take preset span ids; ``False`` when it cannot."""
    inner = getattr(tracer, "id_generator", None)
    if inner is None:
        return False
    if not isinstance(inner, _PresetIds):
        tracer.id_generator = _PresetIds(inner)
    return True


@dataclass(eq=False, slots=True)
class _Handle:
    span: Any
    trace: TraceParent | None


def _trace_of(span: Any) -> TraceParent | None:
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return TraceParent(ctx.trace_id, ctx.span_id, int(ctx.trace_flags))


def _remote(parent: TraceParent) -> Any:
    span = NonRecordingSpan(
        SpanContext(parent.trace_id, parent.span_id, True, TraceFlags(parent.flags & 0xFF))
    )
    return trace.set_span_in_context(span)


def _call_attributes(call: CallStart) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": "function",
        "toolray.scope": call.scope or "",
    }


@final
class SpanObserver:
    """An observer (``toolray.lowlevel.Observer``) that records spans with ``tracer``."""

    def __init__(self, tracer: Any) -> None:
        self._tracer = tracer
        self._presets = _install_preset_ids(tracer)
        self._live: dict[int, Any] = {}

    def environment_event(self, event: EnvironmentEvent) -> None:
        """A span ``toolray environment <event>`` over the event's own time (lost: an error)."""
        end = time.time_ns()
        span = self._tracer.start_span(
            f"toolray environment {event.event}",
            start_time=end - int(event.seconds * 1e9),
            attributes={
                "toolray.environment.name": event.environment,
                "toolray.environment.event": event.event,
                "toolray.scope": event.scope or "",
            },
        )
        if event.event == "lost":
            span.set_attribute("error.type", "ENVIRONMENT_LOST")
            span.set_status(Status(StatusCode.ERROR, event.reason[:200]))
        span.end(end_time=end)

    def live_span(self, span_id: int) -> Any:
        """The live call span with ``span_id`` (a body in this process runs in it), if any."""
        return self._live.get(span_id)

    def batch_started(self, batch: BatchStart) -> _Handle:
        """The batch's span (a child of the current context)."""
        span = self._tracer.start_span(
            "toolray batch",
            attributes={
                "toolray.scope": batch.scope or "",
                "toolray.batch.calls": batch.calls,
                "toolray.backend": batch.backend,
            },
        )
        return _Handle(span, _trace_of(span))

    def batch_ended(self, batch: _Handle, error: BaseException | None) -> None:
        """The batch's span ends (with status ERROR when the batch itself failed)."""
        if error is not None:
            batch.span.set_attribute("error.type", type(error).__name__)
            batch.span.set_status(Status(StatusCode.ERROR, str(error) or type(error).__name__))
        batch.span.end()

    def call_started(self, call: CallStart, parent: _Handle | None) -> _Handle:
        """The call's span: live, or (``call.span`` given) recorded under that id."""
        name = f"execute_tool {call.name}"
        attributes = _call_attributes(call)
        if call.span is not None:
            return self._recorded(call, name, attributes)
        context = None
        if parent is not None:
            context = trace.set_span_in_context(parent.span)
        span = self._tracer.start_span(name, context, attributes=attributes)
        handle = _Handle(span, _trace_of(span))
        if handle.trace is not None:
            self._live[handle.trace.span_id] = span
        return handle

    def _recorded(self, call: CallStart, name: str, attributes: dict[str, Any]) -> _Handle:
        assert call.span is not None
        parent = call.parent_span
        context = _remote(parent) if parent is not None else None
        token = _preset.set(call.span.span_id if self._presets else None)
        try:
            span = self._tracer.start_span(
                name, context, attributes=attributes, start_time=call.started_ns
            )
        finally:
            _preset.reset(token)
        return _Handle(span, call.span)

    def call_ended(self, call: _Handle, end: CallEnd) -> None:
        """The outcome, the error type and status of a failure; the span ends."""
        if call.trace is not None:
            self._live.pop(call.trace.span_id, None)
        span = call.span
        span.set_attribute("toolray.outcome", end.outcome)
        if end.outcome != "ok":
            span.set_attribute("error.type", end.outcome)
            span.set_status(Status(StatusCode.ERROR, end.message or end.outcome))
        span.end(end_time=end.ended_ns)
