"""OpenTelemetry tracing for toolray: a span per batch and per call (the ``otel`` extra).

:func:`instrument` turns it on for every registry and Ray runtime of the process; the
disposer it returns turns it off. Spans follow the OpenTelemetry GenAI semantic conventions:

- ``toolray batch`` per batch: ``toolray.scope`` (``""`` for the global scope),
  ``toolray.batch.calls``, ``toolray.backend`` (``"in_process"`` or ``"ray"``);
- ``execute_tool <tool name>`` per call, a child of its batch's span:
  ``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type = "function"``, ``toolray.scope``, ``toolray.outcome`` (``"ok"`` or the
  failure's code, ``TOOL_ERROR`` for a failure without one); a failure sets ``error.type``
  to that code and the status to ERROR;
- a nested call (``ctx.dispatch``, a Code Mode — programmatic tool calling — sub-call) is a
  child of its caller's span, with its own call id (``<caller>:sub:<n>``,
  ``<outer>:ptc:<n>``);
- ``toolray environment <event>`` per event of an environment instance kept in this process
  (``open``, ``fork``, ``park``, ``restore``, ``lost``, ``close``), over the time it took:
  ``toolray.environment.name``, ``toolray.environment.event``, ``toolray.scope``; ``lost``
  sets ``error.type = "ENVIRONMENT_LOST"`` and the status to ERROR. On Ray, instances are
  kept by the executor actors, which count these events as metrics instead;
- ``<mcp method> [<tool name>]`` per MCP request a toolray server answers over HTTP
  (``toolray.adapters.mcp.mcp_http_app``), a SERVER span parented to the client's W3C
  ``traceparent`` when it sends one (in the request's ``_meta``, else as an HTTP header):
  ``mcp.method.name``, ``jsonrpc.request.id``, ``toolray.tenant``, ``mcp.session.id``, and
  for ``tools/call`` ``gen_ai.tool.name``; the batch span of the call is its child.

The body runs with its call's span as the current OpenTelemetry context, in-process and on
a Ray worker (the W3C ``traceparent`` travels with the call), so a span the body starts is
a child of the call's span, exported by the tracer provider of the process it runs in.

``import toolray`` never imports OpenTelemetry; this module does only in :func:`instrument`.
"""

from __future__ import annotations

from typing import Any

from toolray import Disposer, __version__
from toolray.lowlevel import observe, register_local_spans, watch_environments

__all__ = ("instrument",)

_MISSING = 'toolray.otel needs OpenTelemetry: pip install "toolray[otel]"'


def instrument(*, tracer_provider: Any = None) -> Disposer:
    """Record a span for every batch and call of this process; returns the disposer.

    ``tracer_provider`` is an OpenTelemetry ``TracerProvider`` (default: the global one,
    ``opentelemetry.trace.get_tracer_provider()``).

    Example:
        >>> from opentelemetry.sdk.trace import TracerProvider
        >>> from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        >>> from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        ...     InMemorySpanExporter)
        >>> from toolray import ToolBatchInput, ToolCall, ToolRegistry, tool
        >>> exporter = InMemorySpanExporter()
        >>> provider = TracerProvider()
        >>> provider.add_span_processor(SimpleSpanProcessor(exporter))
        >>> @tool(concurrency_safe=True)
        ... def add(a: int, b: int) -> int:
        ...     "Add two integers."
        ...     return a + b
        >>> registry = ToolRegistry()
        >>> _ = registry.register(add)
        >>> batch = ToolBatchInput([ToolCall("c1", "add", {"a": 1, "b": 2})])
        >>> with instrument(tracer_provider=provider):
        ...     _ = registry.execute_batch_sync(batch)
        >>> [span.name for span in exporter.get_finished_spans()]
        ['execute_tool add', 'toolray batch']
    """
    try:
        from opentelemetry import trace

        from ._server import add_tracer
        from ._spans import SpanObserver
    except ImportError as err:
        raise ImportError(_MISSING) from err
    provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
    if not hasattr(provider, "get_tracer"):
        raise TypeError(
            f"instrument() takes an OpenTelemetry TracerProvider, not {type(provider).__name__}"
        )
    tracer = provider.get_tracer("toolray", __version__)
    observer = SpanObserver(tracer)
    detach = observe(observer)
    forget = register_local_spans(observer.live_span)
    unwatch = watch_environments(observer.environment_event)
    unserve = add_tracer(tracer)

    def dispose() -> None:
        detach()
        forget()
        unwatch()
        unserve()

    return Disposer(dispose)
