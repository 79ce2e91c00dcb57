"""Tools for the observability tests on Ray (pickled by value into the actors).

A probe's body reports its process and the trace context it runs in — the current span,
and the parent of a span it starts with an OpenTelemetry SDK provider of its own process.
"""

from __future__ import annotations

import os
from typing import Any

from toolray import ToolDefinition, ToolOutput, text_block

_OUT = ToolOutput(schema={}, render=lambda args, value: [text_block(str(value))])
_providers: list[Any] = []


def _seen() -> dict[str, Any]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    if not _providers:  # this process's own provider (a worker exports to its own backend)
        _providers.append(TracerProvider())
    current = trace.get_current_span().get_span_context()
    with _providers[0].get_tracer("body").start_as_current_span("inside") as inner:
        parent = inner.parent
        own = inner.get_span_context()
    return {
        "trace": f"{current.trace_id:032x}",
        "current": f"{current.span_id:016x}",
        "inside_trace": f"{own.trace_id:032x}",
        "inside_parent": f"{parent.span_id:016x}" if parent is not None else None,
        "pid": os.getpid(),
    }


def probe_tool(name: str, *, sync: bool) -> ToolDefinition:
    """Reports the trace context its body runs in (a sync body in a thread, or async)."""

    def sync_body(args: Any, ctx: Any) -> Any:
        return _seen()

    async def async_body(args: Any, ctx: Any) -> Any:
        return _seen()

    return ToolDefinition(
        name=name,
        description="Where am I in the trace",
        parameters={"type": "object"},
        output=_OUT,
        execute=sync_body if sync else async_body,
        is_concurrency_safe=lambda args: True,
    )
