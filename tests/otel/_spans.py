"""Reading exported spans: by name, by id, and their parent links."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans(exporter) if s.name == name]


def one(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = named(exporter, name)
    assert len(found) == 1, [s.name for s in spans(exporter)]
    return found[0]


def by_call_id(exporter: InMemorySpanExporter) -> dict[str, ReadableSpan]:
    return {
        str(s.attributes["gen_ai.tool.call.id"]): s
        for s in spans(exporter)
        if s.attributes and "gen_ai.tool.call.id" in s.attributes
    }


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    return span.get_span_context().span_id


def trace_id(span: ReadableSpan) -> int:
    return span.get_span_context().trace_id


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def check_children(exporter: InMemorySpanExporter, parent: str, prefix: str, tool: str) -> None:
    """The calls are ``parent`` and its ``<parent>:<prefix>:1``/``2``, children of its span."""
    found = by_call_id(exporter)
    subs = [f"{parent}:{prefix}:1", f"{parent}:{prefix}:2"]
    assert sorted(found) == [parent, *subs]
    for sub in subs:
        assert parent_id(found[sub]) == span_id(found[parent])
        assert found[sub].name == f"execute_tool {tool}"
