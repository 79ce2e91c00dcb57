"""W3C trace context: a span's identity as it travels with a call, and running a body in it.

A call that is traced carries :class:`TraceParent` — the trace id, the id of its own span
and the sampled flag — from where it is scheduled to where its body runs (another thread,
a Ray worker, a call's own process), as the ``traceparent`` text of the W3C Trace Context
specification. :func:`activated` makes it the current OpenTelemetry context around a body,
so a span the body starts is a child of the call's span.

OpenTelemetry is imported here only when a traced body runs (it never is unless a process
was instrumented, or received a traced call); without it installed, :func:`activated` does
nothing. A process that holds the call's span itself (in-process instrumentation) registers
a lookup with :func:`register_local_spans`, so the body sees that live span.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ("TraceParent", "activated", "new_span_id", "register_local_spans")

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_random = random.SystemRandom()
_local: list[Callable[[int], Any]] = []


def new_span_id() -> int:
    """A random, valid (non-zero) 64-bit span id."""
    while True:
        span_id = _random.getrandbits(64)
        if span_id:
            return span_id


@dataclass(frozen=True, slots=True)
class TraceParent:
    """One span's context as it crosses threads and processes (W3C ``traceparent``).

    Example:
        >>> tp = TraceParent.parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        >>> (tp.sampled, str(tp.child(7)))
        (True, '00-0af7651916cd43dd8448eb211c80319c-0000000000000007-01')
    """

    trace_id: int
    span_id: int
    flags: int = 1
    """The W3C trace flags (bit 0: sampled)."""

    @property
    def sampled(self) -> bool:
        """Whether the trace is recorded (the sampled flag)."""
        return bool(self.flags & 1)

    def __str__(self) -> str:
        return f"00-{self.trace_id:032x}-{self.span_id:016x}-{self.flags & 0xFF:02x}"

    @classmethod
    def parse(cls, text: object) -> TraceParent | None:
        """The context ``text`` names, or ``None`` when it is not a valid ``traceparent``."""
        if not isinstance(text, str):
            return None
        found = _TRACEPARENT.match(text.strip().lower())
        if found is None:
            return None
        trace_id, span_id = int(found[1], 16), int(found[2], 16)
        if not trace_id or not span_id:
            return None
        return cls(trace_id, span_id, int(found[3], 16))

    def child(self, span_id: int | None = None) -> TraceParent:
        """A span of the same trace, with ``span_id`` (default: a new random id)."""
        return TraceParent(self.trace_id, span_id or new_span_id(), self.flags)


def register_local_spans(lookup: Callable[[int], Any]) -> Callable[[], None]:
    """Let :func:`activated` find live spans of this process by span id; returns the undo."""
    _local.append(lookup)

    def undo() -> None:
        with contextlib.suppress(ValueError):
            _local.remove(lookup)

    return undo


_otel: list[Any] = []
"""``[context, trace]`` once OpenTelemetry was imported (``[None, None]``: not installed)."""


def _opentelemetry() -> tuple[Any, Any]:
    if not _otel:
        try:
            from opentelemetry import context, trace
        except ImportError:
            _otel.extend((None, None))
        else:
            _otel.extend((context, trace))
    return _otel[0], _otel[1]


def _span_for(trace: Any, parent: TraceParent) -> Any:
    for lookup in tuple(_local):
        span = lookup(parent.span_id)
        if span is not None:
            return span
    flags = trace.TraceFlags(parent.flags & 0xFF)
    context = trace.SpanContext(parent.trace_id, parent.span_id, True, flags)
    return trace.NonRecordingSpan(context)


@contextlib.contextmanager
def activated(parent: TraceParent | str | None) -> Iterator[None]:
    """Run the ``with`` block with ``parent`` as the current OpenTelemetry span.

    Attach and detach happen in the caller's context (one task, or one thread); a sync body
    in a pool thread needs the block around the body inside that thread. Does nothing for
    ``None``, an invalid ``traceparent``, or a process without OpenTelemetry.
    """
    if isinstance(parent, str):
        parent = TraceParent.parse(parent)
    context, trace = _opentelemetry() if parent is not None else (None, None)
    if parent is None or context is None or trace is None:
        yield
        return
    token = context.attach(trace.set_span_in_context(_span_for(trace, parent)))
    try:
        yield
    finally:
        context.detach(token)
