"""The hot wire records pickle cheaply and come back equal.

A worker request, a worker's settled outcome, and a batch's stream chunk and end record go
through the C pickler as one ``bytes`` value inside Ray's cloudpickle (their contents are
core values and JSON); what the C pickler refuses (a local class: a tool's own exception,
a span's odd value) still crosses by cloudpickle.
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
from toolray.errors import ToolWorkerLostError
from toolray.isolation import CallOutcome, error_data, outcomes_bytes, outcomes_of, rebuild_error
from toolray_actors._wire import (
    Committed,
    LogRecord,
    Settled,
    StreamChunk,
    StreamEnd,
    WorkerRequest,
)


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


class _ToolsOwnError(Exception):
    pass


def test_worker_requests_and_outcomes_round_trip() -> None:
    request = WorkerRequest(
        "tok-1", "k", b"blob", {"a": [1]}, {"call_id": "c1", "home": ["e", "n"]}
    )
    assert _round_trip(request) == request
    assert _round_trip(request.without_code()) == request.without_code()
    lost = CallOutcome(status="lost", detail="the call's process exited with status 3")
    assert _round_trip(Settled("tok-1", lost)) == Settled("tok-1", lost)

    def local_error() -> Exception:
        class Local(Exception):  # only cloudpickle takes it (by value)
            pass

        return Local("boom")

    for error in (ToolWorkerLostError("gone"), _ToolsOwnError("own"), local_error()):
        outcome = CallOutcome(status="error", error=error_data(error))
        ((token, back),) = outcomes_of(outcomes_bytes([("t", outcome)]))  # as a worker replies
        assert (token, back) == ("t", outcome)
        assert back.error is not None
        assert back.error.name == type(error).__name__
        assert str(rebuild_error(back.error)) == str(error)
