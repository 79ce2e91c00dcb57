"""Fixtures of the tracing suite: a real OpenTelemetry SDK provider with an in-memory exporter."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolray.otel import instrument


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    """Finished spans, in the order they ended."""
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """An SDK tracer provider exporting to ``exporter`` as each span ends."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


@pytest.fixture
def traced(provider: TracerProvider) -> Iterator[TracerProvider]:
    """toolray instrumented with ``provider`` for the test (disposed after it)."""
    with instrument(tracer_provider=provider):
        yield provider
