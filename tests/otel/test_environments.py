"""Spans of environment instances kept in this process: one per event, over its own time."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolray import EnvironmentLostError, ToolRegistry, define_environment


def test_open_fork_and_close_are_spans(traced: Any, exporter: InMemorySpanExporter) -> None:
    registry = ToolRegistry()
    registry.register_environment(
        define_environment("c", create=lambda config: {"n": 0}, fork=lambda s: dict(s))
    )
    h = registry.environment("c", scope="a")
    h.open_sync()
    h.fork_sync("b")
    h.close_sync()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [
        "toolray environment open",
        "toolray environment fork",
        "toolray environment close",
    ]
    assert dict(spans[1].attributes or {}) == {
        "toolray.environment.name": "c",
        "toolray.environment.event": "fork",
        "toolray.scope": "b",
    }
    assert all(s.end_time is not None and s.start_time is not None for s in spans)
    assert all(s.end_time >= s.start_time for s in spans)  # type: ignore[operator]


def test_a_lost_instance_is_an_error_span(traced: Any, exporter: InMemorySpanExporter) -> None:
    import asyncio

    from toolray.testing import FakeClock

    def restore(data: bytes) -> Any:
        raise OSError("the disk is gone")

    clock = FakeClock()
    registry = ToolRegistry(clock=clock)
    registry.register_environment(
        define_environment("c", create=lambda config: {"n": 0}, restore=restore, park_after_s=1)
    )
    h = registry.environment("c", scope="a")
    h.open_sync()
    clock.advance(2)
    assert asyncio.run(registry.environments.park_idle()) == 1
    assert h.status_sync().state == "parked"
    with pytest.raises(EnvironmentLostError, match="the disk is gone"):
        h.snapshot_sync()
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == [
        "toolray environment open",
        "toolray environment park",
        "toolray environment lost",
    ]
    lost = exporter.get_finished_spans()[-1]
    assert lost.status.status_code is StatusCode.ERROR
    assert "the disk is gone" in (lost.status.description or "")
    assert (lost.attributes or {})["error.type"] == "ENVIRONMENT_LOST"
