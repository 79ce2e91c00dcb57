"""What a batch's stream carries to the driver pickles cheaply and comes back equal.

Results, failures and log records are core values and JSON: a stream chunk or end record
goes through the C pickler as one ``bytes`` value inside Ray's cloudpickle, and a record the
C pickler refuses (a local class in a span's trace) still crosses by cloudpickle.
"""

from __future__ import annotations

import pickle
from typing import Any

from ray import cloudpickle

from toolray import (
    ToolCall,
    ToolCallResult,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    UserMessage,
    snapshot_json,
)
from toolray_actors._wire import Committed, LogRecord, StreamChunk, StreamEnd


def _results() -> list[ToolCallResult]:
    ok = ToolExecutionSuccess(
        snapshot_json({"n": [1, 2.5, None]}),
        snapshot_json([{"type": "text", "text": "hi"}]),
        snapshot_json({"m": True}),
        (),
        True,
    )
    info = ToolErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT", "the call's process was terminated")
    failed = ToolExecutionFailure(
        ToolFailure("tool call timed out after 400ms", info),
        snapshot_json([{"type": "text", "text": "Error: timed out"}]),
    )
    return [ToolCallResult("c1", ok), ToolCallResult("c2", failed)]


def _round_trip(record: Any) -> Any:
    return pickle.loads(cloudpickle.dumps(record))


def test_results_and_calls_round_trip_through_the_wire_pickler() -> None:
    for value in [*_results(), ToolCall("c1", "echo", {"text": "hi"}), ToolCall("c2", "x", "{}")]:
        back = _round_trip(value)
        assert back == value
        assert type(back) is type(value)


def test_stream_records_round_trip_and_travel_as_one_bytes_value() -> None:
    entries: list[Any] = [Committed(i, r) for i, r in enumerate(_results())]
    entries.append(LogRecord({"kind": "result", "call_id": "c1"}))
    chunk = StreamChunk(entries)
    end = StreamEnd(
        (UserMessage(snapshot_json([{"type": "text", "text": "x"}])),), True, [], entries
    )
    for record in (chunk, end):
        reduced = record.__reduce__()
        assert isinstance(reduced[1][1], bytes)  # the fields, pickled once by the C pickler
        assert _round_trip(record) == record


def test_a_record_the_c_pickler_refuses_still_crosses() -> None:
    class Local:  # not importable by name: only cloudpickle takes it (by value)
        def __eq__(self, other: object) -> bool:
            return type(other).__name__ == "Local"

        __hash__ = object.__hash__

    end = StreamEnd((), False, [{"span": Local()}], [])
    back = _round_trip(end)
    assert back.trace[0]["span"] == Local()
