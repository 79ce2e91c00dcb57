"""A server span around one request a toolray server answers (an MCP request over HTTP).

The span is a child of the client's W3C trace context when the request carries one (the
MCP ``_meta`` carrier first, then the HTTP ``traceparent`` header), and it is the current
context while the request runs: the batch and call spans of ``instrument()`` nest under it.
It goes to the tracer provider :func:`toolray.otel.instrument` was given (the latest one),
else to OpenTelemetry's global provider (a no-op until one is configured).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

__all__ = ("add_tracer", "server_span")

_tracers: list[Any] = []


def add_tracer(tracer: Any) -> Any:
    """Use ``tracer`` for server spans (the latest added wins); returns its remover."""
    _tracers.append(tracer)

    def remove() -> None:
        if tracer in _tracers:
            _tracers.remove(tracer)

    return remove


def _tracer() -> Any:
    from opentelemetry import trace

    return _tracers[-1] if _tracers else trace.get_tracer("toolray")


def _parent(carriers: Sequence[Mapping[str, Any]]) -> Any:
    from opentelemetry import propagate, trace

    for carrier in carriers:
        if not carrier or "traceparent" not in carrier:
            continue
        try:
            context = propagate.extract(dict(carrier))
        except (TypeError, ValueError):
            continue
        if trace.get_current_span(context).get_span_context().is_valid:
            return context
    return None


@contextmanager
def server_span(
    name: str, *, carriers: Sequence[Mapping[str, Any]], attributes: Mapping[str, Any]
) -> Iterator[Any]:
    """A SERVER span, current while the block runs, parented to the first valid carrier.

    Yields the span (its status and attributes are the caller's to set on failure).
    """
    from opentelemetry.trace import SpanKind

    with _tracer().start_as_current_span(
        name,
        context=_parent(carriers),
        kind=SpanKind.SERVER,
        attributes=dict(attributes),
        record_exception=False,
        set_status_on_exception=True,
    ) as span:
        yield span
