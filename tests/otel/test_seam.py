"""The observer seam without OpenTelemetry: what observers hear, containment, the log."""

from __future__ import annotations

import logging
import subprocess
import sys
from typing import Any

import pytest

from tests.otel._tools import add, boom
from toolray import AbortController, ToolBatchInput, ToolCall, ToolRegistry
from toolray.lowlevel import (
    BatchStart,
    CallEnd,
    CallStart,
    TraceParent,
    activated,
    observe,
    outcome_of,
)


class Recorder:
    """Remembers every event, in order; handles are the event's index."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, Any]] = []

    def batch_started(self, batch: BatchStart) -> int:
        self.events.append(("batch", batch, None))
        return len(self.events) - 1

    def batch_ended(self, batch: int, error: BaseException | None) -> None:
        self.events.append(("batch_end", batch, error))

    def call_started(self, call: CallStart, parent: Any) -> int:
        self.events.append(("call", call, parent))
        return len(self.events) - 1

    def call_ended(self, call: int, end: CallEnd) -> None:
        self.events.append(("call_end", call, end))


class Broken:
    """Takes batches, then raises from every other method."""

    def batch_started(self, batch: BatchStart) -> Any:
        return "batch"

    def batch_ended(self, batch: Any, error: BaseException | None) -> None:
        raise RuntimeError("broken observer")

    def call_started(self, call: CallStart, parent: Any) -> Any:
        raise RuntimeError("broken observer")

    def call_ended(self, call: Any, end: CallEnd) -> None:
        raise AssertionError("a call whose start failed is not ended")


def _run(registry: ToolRegistry, *calls: ToolCall) -> Any:
    return registry.execute_batch_sync(ToolBatchInput(list(calls), AbortController().signal))


def test_observers_hear_each_batch_and_call_in_order_with_parents() -> None:
    registry = ToolRegistry()
    registry.register(add)
    recorder = Recorder()
    with observe(recorder):
        _run(registry, ToolCall("c1", "add", {"a": 1, "b": 2}), ToolCall("c2", "zzz", {}))
    kinds = [kind for kind, _, _ in recorder.events]
    assert (kinds[0], kinds[-1]) == ("batch", "batch_end")
    starts = {e[1].call_id: (i, e[2]) for i, e in enumerate(recorder.events) if e[0] == "call"}
    assert {cid: parent for cid, (_, parent) in starts.items()} == {"c1": 0, "c2": 0}
    ends = {e[1]: e[2].outcome for e in recorder.events if e[0] == "call_end"}
    assert ends == {starts["c1"][0]: "ok", starts["c2"][0]: "UNKNOWN_TOOL"}
    batch = recorder.events[0][1]
    assert (batch.scope, batch.calls, batch.backend) == (None, 2, "in_process")


def test_a_failing_observer_changes_no_result_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    registry.register(add)
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, "toolray"), observe(Broken()), observe(recorder):
        result = _run(registry, ToolCall("c1", "add", {"a": 1, "b": 2}))
    assert result.results[0].result.value == 3
    assert [kind for kind, _, _ in recorder.events] == ["batch", "call", "call_end", "batch_end"]
    failed = [r.getMessage() for r in caplog.records if "broken observer" in r.getMessage()]
    assert len(failed) == 2
    assert "call_started" in failed[0]
    assert "batch_ended" in failed[1]


def test_nothing_is_observed_once_detached() -> None:
    registry = ToolRegistry()
    registry.register(add)
    recorder = Recorder()
    observe(recorder)()
    _run(registry, ToolCall("c1", "add", {"a": 1, "b": 2}))
    assert recorder.events == []


def test_a_failed_call_logs_one_record_with_its_identity(
    caplog: pytest.LogCaptureFixture,
) -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(boom)
    registry.scope("agent-9")
    with caplog.at_level(logging.DEBUG, "toolray"):
        registry.execute_batch_sync(
            ToolBatchInput(
                [ToolCall("ok", "add", {"a": 1, "b": 2}), ToolCall("bad", "boom", {})],
                AbortController().signal,
                scope="agent-9",
            )
        )
    mine = [r for r in caplog.records if getattr(r, "call_id", None) is not None]
    assert len(mine) == 1
    record = mine[0]
    assert (record.call_id, record.tool, record.scope) == ("bad", "boom", "agent-9")  # type: ignore[attr-defined]
    assert record.levelno == logging.DEBUG
    assert "no luck" in record.getMessage()


def test_outcomes_and_traceparents() -> None:
    registry = ToolRegistry()
    registry.register(boom)
    result = _run(registry, ToolCall("c1", "boom", {}), ToolCall("c2", "zzz", {}))
    assert [outcome_of(r.result) for r in result.results] == ["TOOL_ERROR", "UNKNOWN_TOOL"]
    text = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    parsed = TraceParent.parse(text)
    assert parsed is not None
    assert (str(parsed), parsed.sampled) == (text, True)
    for bad in (
        "",
        "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        7,
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",
    ):
        assert TraceParent.parse(bad) is None
    child = parsed.child()
    assert (child.trace_id, child.flags) == (parsed.trace_id, 1)
    assert child.span_id not in (0, parsed.span_id)
    with activated(None), activated("not a traceparent"):
        pass


def test_import_toolray_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, toolray, toolray.lowlevel, toolray.otel\n"
        "from toolray import ToolBatchInput, ToolCall, ToolRegistry, tool\n"
        "@tool\n"
        "def one() -> int:\n"
        "    '''One.'''\n"
        "    return 1\n"
        "r = ToolRegistry(); r.register(one)\n"
        "r.execute_batch_sync(ToolBatchInput([ToolCall('c', 'one', {})]))\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
