"""Spans of in-process batches and calls, on the real OpenTelemetry SDK."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolray import (
    AbortController,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
    ToolRunContext,
    tool,
)
from toolray.code import CodeRunOutcome
from toolray.otel import instrument

from ._spans import (
    attrs,
    by_call_id,
    check_children,
    named,
    one,
    parent_id,
    span_id,
    spans,
    trace_id,
)
from ._tools import add, boom

BODY_PROVIDER: list[TracerProvider] = []
"""The provider the bodies below start their own spans with (this test's)."""


def _ids_of_current() -> tuple[int, int]:
    ctx = trace.get_current_span().get_span_context()
    return ctx.trace_id, ctx.span_id


@tool
def where_sync() -> list[str]:
    """A sync body reporting the current span and the parent of a span it starts."""
    current = _ids_of_current()
    with BODY_PROVIDER[-1].get_tracer("test").start_as_current_span("inside") as inner:
        parent = inner.parent
    assert parent is not None
    return [f"{current[0]:x}", f"{current[1]:x}", f"{parent.span_id:x}"]


@tool
async def where_async() -> list[str]:
    """An async body doing the same."""
    current = _ids_of_current()
    with BODY_PROVIDER[-1].get_tracer("test").start_as_current_span("inside") as inner:
        parent = inner.parent
    assert parent is not None
    return [f"{current[0]:x}", f"{current[1]:x}", f"{parent.span_id:x}"]


def _registry(*tools: Any) -> ToolRegistry:
    registry = ToolRegistry()
    for t in tools:
        registry.register(t)
    return registry


def _batch(*calls: ToolCall, scope: str | None = None) -> ToolBatchInput:
    return ToolBatchInput(list(calls), AbortController().signal, scope=scope)


def test_a_batch_span_and_one_child_span_per_call(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = _registry(add, boom)
    registry.scope("agent-1")
    batch = _batch(
        ToolCall("c1", "add", {"a": 1, "b": 2}),
        ToolCall("c2", "nope", {}),
        ToolCall("c3", "boom", {}),
        ToolCall("c4", "add", {"a": "x"}),
        scope="agent-1",
    )
    registry.execute_batch_sync(batch)

    root = one(exporter, "toolray batch")
    assert attrs(root) == {
        "toolray.scope": "agent-1",
        "toolray.batch.calls": 4,
        "toolray.backend": "in_process",
    }
    calls = by_call_id(exporter)
    assert sorted(calls) == ["c1", "c2", "c3", "c4"]
    assert [calls[c].name for c in ("c1", "c2", "c3", "c4")] == [
        "execute_tool add",
        "execute_tool nope",
        "execute_tool boom",
        "execute_tool add",
    ]
    for call in calls.values():
        assert parent_id(call) == span_id(root)
        assert trace_id(call) == trace_id(root)
        assert root.start_time is not None
        assert call.start_time is not None
        assert root.start_time <= call.start_time
    assert attrs(calls["c1"]) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "toolray.scope": "agent-1",
        "toolray.outcome": "ok",
    }
    assert calls["c1"].status.status_code is StatusCode.UNSET
    for call_id, code in (("c2", "UNKNOWN_TOOL"), ("c3", "TOOL_ERROR"), ("c4", "INVALID_ARGS")):
        span = calls[call_id]
        assert span.attributes is not None
        assert (span.attributes["toolray.outcome"], span.attributes["error.type"]) == (code, code)
        assert span.status.status_code is StatusCode.ERROR
    assert calls["c3"].status.description == "no luck"


def test_the_global_scope_is_an_empty_string_and_the_batch_is_a_child_of_the_callers_span(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = _registry(add)
    with traced.get_tracer("agent").start_as_current_span("turn") as turn:
        registry.execute_batch_sync(_batch(ToolCall("c1", "add", {"a": 1, "b": 1})))
    root = one(exporter, "toolray batch")
    assert attrs(root)["toolray.scope"] == ""
    assert parent_id(root) == turn.get_span_context().span_id
    assert attrs(by_call_id(exporter)["c1"])["toolray.scope"] == ""


def test_a_body_runs_in_its_calls_span_sync_and_async(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    BODY_PROVIDER.append(traced)
    registry = _registry(where_sync, where_async)
    result = registry.execute_batch_sync(
        _batch(ToolCall("s", "where_sync", {}), ToolCall("a", "where_async", {}))
    )
    calls = by_call_id(exporter)
    inside = named(exporter, "inside")
    assert len(inside) == 2
    for r in result.results:
        call = calls[r.call_id]
        seen_trace, seen_current, seen_parent = r.result.value
        assert int(seen_trace, 16) == trace_id(call)
        assert int(seen_current, 16) == span_id(call)  # the live call span is current
        assert int(seen_parent, 16) == span_id(call)
    assert {parent_id(s) for s in inside} == {span_id(c) for c in calls.values()}


def test_nested_dispatch_spans_are_children_of_their_callers_span(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @tool
    async def twice(a: int, *, ctx: ToolRunContext) -> int:
        """Add a to itself through a nested call, then once more from a thread."""
        first = await ctx.dispatch("add", {"a": a, "b": a})
        second = await asyncio.to_thread(ctx.dispatch_sync, "add", {"a": first.value, "b": 0})
        return int(second.value)

    registry = _registry(add, twice)
    result = registry.execute_batch_sync(_batch(ToolCall("c1", "twice", {"a": 2})))
    assert result.results[0].result.value == 4
    check_children(exporter, "c1", "sub", "add")
    calls = by_call_id(exporter)
    assert attrs(calls["c1:sub:1"])["toolray.outcome"] == "ok"
    assert parent_id(calls["c1"]) == span_id(one(exporter, "toolray batch"))


class _Program:
    """A code runtime whose 'program' calls each binding named in it with ``{"a": 1, "b": 2}``."""

    language = "python"

    async def run(self, program: str, bindings: Mapping[str, Any], signal: Any) -> Any:
        values = [await bindings[name]({"a": 1, "b": 2}) for name in program.split()]
        return CodeRunOutcome(logs=[], result=values, has_result=True)


def test_code_mode_sub_calls_are_children_of_the_run_code_span(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = ToolRegistry(mode="code", code_runtime=_Program())
    registry.register(add)
    arguments = {"code": "add add", "description": "add twice"}
    result = registry.execute_batch_sync(_batch(ToolCall("c1", "run_code", arguments)))
    assert result.results[0].result.is_error is False
    check_children(exporter, "c1", "ptc", "add")
    assert by_call_id(exporter)["c1"].name == "execute_tool run_code"


def test_calls_that_never_start_get_their_span_too(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = _registry(add)
    controller = AbortController()
    controller.abort("stop")
    batch = ToolBatchInput([ToolCall("c1", "add", {"a": 1, "b": 1})], controller.signal)
    registry.execute_batch_sync(batch)
    span = by_call_id(exporter)["c1"]
    assert attrs(span)["toolray.outcome"] == "ABORTED_BEFORE_DISPATCH"
    assert parent_id(span) == span_id(one(exporter, "toolray batch"))


async def test_a_lone_call_is_a_child_of_the_current_span(
    traced: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = _registry(add)
    with traced.get_tracer("agent").start_as_current_span("turn") as turn:
        inp = ToolExecutionInput("c1", "add", {"a": 1, "b": 1}, AbortController().signal)
        await registry.execute(inp)
    assert named(exporter, "toolray batch") == []
    assert parent_id(by_call_id(exporter)["c1"]) == turn.get_span_context().span_id


def test_the_disposer_turns_tracing_off(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    registry = _registry(add)
    disposer = instrument(tracer_provider=provider)
    registry.execute_batch_sync(_batch(ToolCall("c1", "add", {"a": 1, "b": 1})))
    assert len(spans(exporter)) == 2
    disposer()
    disposer()  # idempotent
    exporter.clear()
    result = registry.execute_batch_sync(_batch(ToolCall("c2", "add", {"a": 1, "b": 1})))
    assert result.results[0].result.value == 2
    assert spans(exporter) == []


def test_instrument_rejects_what_is_not_a_tracer_provider() -> None:
    with pytest.raises(TypeError, match="TracerProvider"):
        instrument(tracer_provider=object())
