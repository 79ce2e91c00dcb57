"""Spans of batches run on Ray: recorded by the driver, the body on a worker inside its span.

The driver is instrumented with the real OpenTelemetry SDK and an in-memory exporter. The
executor actor gives each call a span id (a child of the driver's batch span, or of the
caller's span for a nested call) that travels to the worker; a probe body reports the
trace context it ran in, and the parent of a span it started with its own process's SDK
provider — both must be the call span the driver recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import cloudpickle
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests import tools
from tests.actors import _otel_tools
from tests.otel._spans import (
    attrs,
    by_call_id,
    check_children,
    one,
    parent_id,
    span_id,
    spans,
    trace_id,
)
from toolray import AbortController, ToolBatchInput, ToolCall
from toolray.otel import instrument

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(_otel_tools)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """The driver instrumented for the test; its spans land here."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with instrument(tracer_provider=provider):
        yield memory


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope)


def _register(rt: Any, *definitions: Any) -> None:
    for definition in definitions:
        rt.owned.append(rt.registry.register(definition))


async def test_the_driver_records_batch_and_call_spans_with_outcomes(
    rt: Any, scope_key: str, exporter: InMemorySpanExporter
) -> None:
    _register(rt, tools.echo_tool("ot_echo"), tools.failing_tool("ot_fail", "harness"))
    calls = [
        ToolCall("c1", "ot_echo", {"text": "hi"}),
        ToolCall("c2", "ot_fail", {}),
        ToolCall("c3", "ot_nope", {}),
    ]
    result = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    assert [r.result.is_error for r in result.results] == [False, True, True]

    root = one(exporter, "toolray batch")
    assert attrs(root) == {
        "toolray.scope": scope_key,
        "toolray.batch.calls": 3,
        "toolray.backend": "ray",
    }
    found = by_call_id(exporter)
    assert sorted(found) == ["c1", "c2", "c3"]
    for call in found.values():
        assert parent_id(call) == span_id(root)
        assert trace_id(call) == trace_id(root)
        assert call.start_time is not None
        assert call.end_time is not None
        assert root.start_time is not None
        assert root.end_time is not None
        assert root.start_time <= call.start_time <= call.end_time <= root.end_time
    assert found["c1"].name == "execute_tool ot_echo"
    assert attrs(found["c1"])["toolray.outcome"] == "ok"
    assert attrs(found["c1"])["gen_ai.tool.call.id"] == "c1"
    assert attrs(found["c1"])["toolray.scope"] == scope_key
    assert found["c1"].status.status_code is StatusCode.UNSET
    for call_id, code in (("c2", "ENOSPC"), ("c3", "UNKNOWN_TOOL")):
        assert attrs(found[call_id])["toolray.outcome"] == code
        assert attrs(found[call_id])["error.type"] == code
        assert found[call_id].status.status_code is StatusCode.ERROR


async def test_nested_calls_on_ray_are_children_of_their_callers_span(
    rt: Any, scope_key: str, exporter: InMemorySpanExporter
) -> None:
    _register(rt, tools.composite_tool("ot_comp"), tools.echo_tool("ot_echo2"))
    calls = [ToolCall("c1", "ot_comp", {"calls": [{"name": "ot_echo2"}, {"name": "ot_echo2"}]})]
    result = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    assert result.results[0].result.is_error is False
    check_children(exporter, "c1", "sub", "ot_echo2")
    assert parent_id(by_call_id(exporter)["c1"]) == span_id(one(exporter, "toolray batch"))


async def test_code_mode_sub_calls_on_ray_are_children_of_the_run_code_span(
    rt: Any, scope_key: str, exporter: InMemorySpanExporter
) -> None:
    scope = rt.scope(scope_key)
    rt.owned.append(scope.present_as("code"))
    rt.owned.append(scope.register(tools.text_echo_tool("ot_cm_echo")))
    program = "a = await ot_cm_echo(text='a')\nb = await ot_cm_echo(text='b')\n[a, b]"
    arguments = {"code": program, "description": "two echoes"}
    calls = [ToolCall("c1", "run_code", arguments)]
    result = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    assert result.results[0].result.is_error is False
    check_children(exporter, "c1", "ptc", "ot_cm_echo")
    assert by_call_id(exporter)["c1"].name == "execute_tool run_code"


@pytest.mark.parametrize("isolation", ["call", "shared"])
@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_a_body_on_a_worker_runs_in_its_call_span(
    request: pytest.FixtureRequest,
    scope_key: str,
    exporter: InMemorySpanExporter,
    sync: bool,
    isolation: str,
) -> None:
    """In a call's own process (``"call"``, the default) and in the worker (``"shared"``)."""
    rt = request.getfixturevalue("rt" if isolation == "call" else "shared_rt")
    name = f"ot_probe_{'sync' if sync else 'async'}"
    _register(rt, _otel_tools.probe_tool(name, sync=sync))
    result = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c1", name, {})], scope_key)
    )
    seen = result.results[0].result.value
    call = by_call_id(exporter)["c1"]
    assert int(seen["trace"], 16) == trace_id(call)
    assert int(seen["current"], 16) == span_id(call)
    assert int(seen["inside_trace"], 16) == trace_id(call)
    assert int(seen["inside_parent"], 16) == span_id(call)
    stats = await asyncio.to_thread(rt.stats)
    workers = {a.pid for a in stats.actors if a.kind == "worker"}
    assert (seen["pid"] in workers) is (isolation == "shared")  # where the body ran


async def test_without_instrumentation_nothing_is_recorded_or_sent(rt: Any, scope_key: str) -> None:
    _register(rt, _otel_tools.probe_tool("ot_probe_off", sync=False))
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrument(tracer_provider=provider)()  # on, then off again at once
    result = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c1", "ot_probe_off", {})], scope_key)
    )
    assert spans(memory) == []
    assert int(result.results[0].result.value["trace"], 16) == 0  # no context reached it
