"""Spans to an OTLP collector: a real OTLP/HTTP exporter posting to a local receiver."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from toolray import ToolBatchInput, ToolCall, ToolRegistry, tool
from toolray.otel import instrument


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class _Collector(BaseHTTPRequestHandler):
    received: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.received.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def collector() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    received: list[ExportTraceServiceRequest] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()


def test_spans_reach_an_otlp_http_collector(
    collector: tuple[str, list[ExportTraceServiceRequest]],
) -> None:
    endpoint, received = collector
    provider = TracerProvider(resource=Resource.create({"service.name": "agent-farm"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    registry = ToolRegistry()
    registry.register(add)
    with instrument(tracer_provider=provider):
        registry.execute_batch_sync(ToolBatchInput([ToolCall("c1", "add", {"a": 1, "b": 2})]))
    provider.shutdown()  # flushes the batch processor: the export happens here
    spans = [
        span
        for request in received
        for resource in request.resource_spans
        for scope in resource.scope_spans
        if scope.scope.name == "toolray"
        for span in scope.spans
    ]
    by_name = {span.name: span for span in spans}
    assert sorted(by_name) == ["execute_tool add", "toolray batch"]
    call, batch = by_name["execute_tool add"], by_name["toolray batch"]
    assert call.parent_span_id == batch.span_id
    assert call.trace_id == batch.trace_id
    attributes = {kv.key: kv.value.string_value for kv in call.attributes}
    assert attributes["gen_ai.tool.name"] == "add"
    assert attributes["toolray.outcome"] == "ok"
    service = {
        kv.key: kv.value.string_value
        for request in received
        for resource in request.resource_spans
        for kv in resource.resource.attributes
    }
    assert service["service.name"] == "agent-farm"
