"""``toolray trace``: the pure Chrome/Perfetto converter, and the command without Ray."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from toolray_actors.cli import main
from toolray_actors.cli._chrome import chrome_json, events_to_trace, trace_to_chrome

# A Ray-like batch: c1 and c2 overlap on w1, c3 runs on w2, c4 is an exclusive barrier on
# w1, c5 was never started (the user aborted).
TRACE: list[dict[str, Any]] = [
    {"type": "stage", "kind": "parallel", "start": 0, "time": 0.0001},
    {"type": "call", "index": 0, "callId": "c1", "name": "read_file", "mode": "parallel",
     "started": 0.0002, "settled": 0.120, "committed": 0.121, "isError": False, "code": None,
     "worker": "w1", "killed": False},
    {"type": "call", "index": 1, "callId": "c2", "name": "grep", "mode": "parallel",
     "started": 0.0003, "settled": 0.130, "committed": 0.131, "isError": False, "code": None,
     "worker": "w1", "killed": False},
    {"type": "call", "index": 2, "callId": "c3", "name": "stubborn", "mode": "parallel",
     "started": 0.0004, "settled": 0.650, "committed": 0.651, "isError": True,
     "code": "TOOL_TIMEOUT", "worker": "w2", "killed": True},
    {"type": "stage", "kind": "exclusive", "start": 3, "time": 0.652},
    {"type": "call", "index": 3, "callId": "c4", "name": "write_file", "mode": "exclusive",
     "started": 0.653, "settled": 0.770, "committed": 0.771, "isError": False, "code": None,
     "worker": "w10", "killed": False},
    {"type": "abort", "index": 4, "time": 0.772},
    {"type": "call", "index": 4, "callId": "c5", "name": "read_file", "mode": "skipped",
     "started": 0.772, "committed": 0.772, "isError": True,
     "code": "ABORTED_BEFORE_DISPATCH"},
]  # fmt: skip


def _by_ph(doc: dict[str, Any], ph: str) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == ph]


def _thread_names(doc: dict[str, Any]) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in _by_ph(doc, "M") if e["name"] == "thread_name"}


def _assert_lanes_nest(doc: dict[str, Any]) -> None:
    """Chrome needs the slices of one track to nest; ours never overlap at all."""
    by_tid: dict[int, list[dict[str, Any]]] = {}
    for event in _by_ph(doc, "X"):
        by_tid.setdefault(event["tid"], []).append(event)
    for slices in by_tid.values():
        slices.sort(key=lambda e: e["ts"])
        for a, b in itertools.pairwise(slices):
            assert a["ts"] + a["dur"] <= b["ts"]


def test_every_call_span_has_one_complete_slice_with_its_args() -> None:
    doc = trace_to_chrome(TRACE)
    slices = {e["args"]["callId"]: e for e in _by_ph(doc, "X")}
    spans = [e for e in TRACE if e["type"] == "call"]
    assert len(_by_ph(doc, "X")) == len(spans) == len(slices)
    for span in spans:
        event = slices[span["callId"]]
        assert event["name"] == span["name"]
        assert event["pid"] == 1
        assert event["ts"] == round(span["started"] * 1e6, 3)
        end = span.get("settled", span["committed"])
        assert abs(event["ts"] + event["dur"] - end * 1e6) < 0.01
        for key in ("code", "isError", "mode"):
            assert event["args"][key] == span[key]
    assert slices["c3"]["args"]["killed"] is True
    assert "killed" not in slices["c1"]["args"]


def test_each_worker_has_its_own_named_tracks_and_overlaps_get_lanes() -> None:
    doc = trace_to_chrome(TRACE, unassigned="not dispatched")
    names = _thread_names(doc)
    slices = {e["args"]["callId"]: e for e in _by_ph(doc, "X")}
    track = {call_id: names[e["tid"]] for call_id, e in slices.items()}
    assert track["c1"] == "worker w1"
    assert track["c2"] == "worker w1 #2"  # overlaps c1 on the same worker
    assert track["c4"] == "worker w10"
    assert track["c3"] == "worker w2"
    assert track["c5"] == "not dispatched"
    assert names[0] == "scheduler"
    # natural order: w1, w1 #2, w2, w10, then the calls that never reached a worker
    ordered = [names[t] for t in sorted(names)]
    assert ordered == [
        "scheduler", "worker w1", "worker w1 #2", "worker w2", "worker w10", "not dispatched",
    ]  # fmt: skip
    sort_index = {e["tid"] for e in _by_ph(doc, "M") if e["name"] == "thread_sort_index"}
    assert sort_index == set(names)
    process = [e for e in _by_ph(doc, "M") if e["name"] == "process_name"]
    assert [p["args"]["name"] for p in process] == ["toolray batch"]
    assert {e["tid"] for e in _by_ph(doc, "X")} <= set(names)
    _assert_lanes_nest(doc)


def test_barriers_and_aborts_are_process_wide_instants() -> None:
    doc = trace_to_chrome(TRACE)
    instants = _by_ph(doc, "i")
    assert [(e["name"], e["ts"]) for e in instants] == [("barrier", 652000.0), ("abort", 772000.0)]
    assert instants[0]["args"] == {"kind": "exclusive", "start": 3}
    assert instants[1]["args"] == {"index": 4}
    assert all(e["s"] == "p" and e["tid"] == 0 for e in instants)


def test_the_document_is_plain_json() -> None:
    doc = trace_to_chrome(TRACE)
    assert doc["displayTimeUnit"] == "ms"
    assert json.loads(json.dumps(doc)) == doc
    assert json.loads(chrome_json(doc)) == doc
    assert trace_to_chrome([]) == json.loads(chrome_json(trace_to_chrome([])))


def test_an_in_process_trace_shares_one_track_with_lanes() -> None:
    local = [{k: v for k, v in e.items() if k not in ("worker", "killed")} for e in TRACE]
    doc = trace_to_chrome(local)
    names = set(_thread_names(doc).values())
    assert names == {"scheduler", "in-process", "in-process #2", "in-process #3"}
    _assert_lanes_nest(doc)


def test_an_event_log_becomes_a_logical_time_trace() -> None:
    ok = {"isError": False, "content": [{"type": "text", "text": "x"}]}
    aborted = {
        "isError": True,
        "content": [],
        "error": {
            "message": "m",
            "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
        },
    }

    def call(step: int, call_id: str) -> dict[str, Any]:
        return {"type": "tool/call", "turn": 1, "step": step, "callId": call_id, "name": "t",
                "arguments": "{}"}  # fmt: skip

    def result(step: int, call_id: str, wire: dict[str, Any]) -> dict[str, Any]:
        return {"type": "tool/result", "turn": 1, "step": step, "callId": call_id, "result": wire}

    events = [
        call(1, "a"), call(1, "b"), result(1, "a", ok), result(1, "b", ok),  # a parallel pair
        call(1, "w"), result(1, "w", ok),  # a barrier
        call(2, "a"), result(2, "a", ok), call(2, "b"), result(2, "b", aborted),
    ]  # fmt: skip
    trace = events_to_trace(events)
    spans = [e for e in trace if e["type"] == "call"]
    assert [(s["callId"], s["started"], s["committed"]) for s in spans] == [
        ("a", 0.001, 0.003), ("b", 0.002, 0.004), ("w", 0.005, 0.006),
        ("a", 0.007, 0.008), ("b", 0.009, 0.010),
    ]  # fmt: skip
    assert [s["index"] for s in spans] == [0, 1, 2, 0, 1]
    assert spans[-1]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert [e for e in trace if e["type"] == "abort"] == [
        {"type": "abort", "index": 1, "time": 0.009}
    ]
    doc = trace_to_chrome(trace)
    names = _thread_names(doc)
    assert set(names.values()) == {
        "scheduler",
        "turn 1 step 1",
        "turn 1 step 1 #2",
        "turn 1 step 2",
    }
    assert [e["name"] for e in _by_ph(doc, "i")] == ["abort"]
    assert json.loads(json.dumps(doc)) == doc


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert doc["displayTimeUnit"] == "ms"
    return doc


def test_trace_in_process_writes_a_barrier_batch(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "trace.json"
    assert main(["trace", "--in-process", "--out", str(out)]) == 0
    doc = _load(out)
    slices = sorted(_by_ph(doc, "X"), key=lambda e: e["args"]["index"])
    assert [e["name"] for e in slices] == [
        "read_file", "read_file", "grep", "write_file", "read_file", "grep",
    ]  # fmt: skip
    assert [e["args"]["mode"] for e in slices] == ["parallel"] * 3 + ["exclusive"] + [
        "parallel"
    ] * 2
    assert all(e["args"]["isError"] is False for e in slices)
    (barrier,) = _by_ph(doc, "i")
    assert barrier["name"] == "barrier"
    write = slices[3]
    assert all(e["ts"] + e["dur"] <= write["ts"] for e in slices[:3])  # the barrier held
    assert all(write["ts"] + write["dur"] <= e["ts"] for e in slices[4:])
    assert set(_thread_names(doc).values()) >= {"scheduler", "in-process"}
    _assert_lanes_nest(doc)
    printed = capsys.readouterr().out
    assert "barrier" in printed
    assert str(out) in printed


def test_trace_in_process_cancel_shows_the_abort(tmp_path: Path) -> None:
    out = tmp_path / "cancel.json"
    assert main(["trace", "--in-process", "--scenario", "cancel", "--out", str(out)]) == 0
    doc = _load(out)
    codes = [e["args"]["code"] for e in sorted(_by_ph(doc, "X"), key=lambda e: e["args"]["index"])]
    assert codes == ["ABORTED", "ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert [e["name"] for e in _by_ph(doc, "i")] == ["abort"]


def test_trace_from_a_jsonl_event_log(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    ok = {"isError": False, "content": []}
    lines = [
        {"type": "tool/call", "turn": 3, "step": 1, "callId": "c1", "name": "read_file",
         "arguments": "{}"},
        {"type": "tool/result", "turn": 3, "step": 1, "callId": "c1", "result": ok},
    ]  # fmt: skip
    log.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    out = tmp_path / "log-trace.json"
    assert main(["trace", "--from-log", str(log), "--out", str(out)]) == 0
    doc = _load(out)
    (only,) = _by_ph(doc, "X")
    assert only["name"] == "read_file"
    assert only["args"]["callId"] == "c1"
    assert "turn 3 step 1" in _thread_names(doc).values()
    assert doc["otherData"]["clock"].startswith("logical")


def test_in_process_refuses_scenarios_that_need_workers(capsys: Any) -> None:
    assert main(["trace", "--in-process", "--scenario", "crash"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "needs worker processes" in err


def test_the_text_timeline_of_the_same_trace() -> None:
    from toolray_actors.cli._timeline import render_timeline

    lines = render_timeline(TRACE, width=20)
    assert lines[0].split()[:7] == ["#", "call", "tool", "worker", "mode", "start", "end"]
    assert lines[0].rstrip().endswith("772 ms  status")
    body = "\n".join(lines[1:])
    assert lines[1] == "  -- stage 1: parallel group from call 1, at 0.1 ms"
    assert "  == barrier 2: exclusive, call 4 alone, at 652.0 ms" in body
    assert "  !! abort at 772.0 ms: call 5 was never started" in body
    rows = [line for line in lines if line[:4].strip().isdigit()]
    assert [r.split()[1] for r in rows] == ["c1", "c2", "c3", "c4", "c5"]
    assert rows[2].endswith("TOOL_TIMEOUT (worker killed)")
    assert "|" not in rows[4]  # never ran: no bar
    assert rows[4].endswith("ABORTED_BEFORE_DISPATCH")
    bars = [r[r.index("|") : r.rindex("|") + 1] for r in rows[:4]]
    assert all(len(bar) == 22 for bar in bars)
    assert bars[3].startswith("|" + "." * 16)  # the write starts 85 % into the batch
    assert render_timeline([]) == ["  (no trace recorded for this batch)"]


# ---------------------------------------------------------------- Code Mode sub-calls
CODE_TRACE: list[dict[str, Any]] = [
    {"type": "call", "index": 0, "callId": "c1", "name": "run_code", "mode": "exclusive",
     "started": 0.001, "settled": 0.500, "committed": 0.501, "isError": False, "code": None,
     "subCalls": [
         {"callId": "c1:ptc:1", "name": "read_file", "mode": "parallel", "started": 0.10,
          "settled": 0.20, "committed": 0.21, "isError": False, "code": None, "worker": "w1"},
         {"callId": "c1:ptc:2", "name": "read_file", "mode": "parallel", "started": 0.11,
          "settled": 0.22, "committed": 0.23, "isError": False, "code": None, "worker": "w2"},
         {"callId": "c1:ptc:3", "name": "write_file", "mode": "exclusive", "started": 0.30,
          "settled": 0.40, "committed": 0.41, "isError": True, "code": "INVALID_ARGS",
          "worker": "w1"},
     ]},
]  # fmt: skip


def test_run_code_sub_calls_get_a_track_right_after_their_call() -> None:
    doc = trace_to_chrome(CODE_TRACE)
    names = _thread_names(doc)
    order = [names[tid] for tid in sorted(names)]
    assert order == [
        "scheduler",
        "in-process",
        "c1 run_code > sub-calls",
        "c1 run_code > sub-calls #2",
    ]
    subs = [e for e in _by_ph(doc, "X") if e["args"].get("parentCallId") == "c1"]
    assert sorted(e["args"]["callId"] for e in subs) == ["c1:ptc:1", "c1:ptc:2", "c1:ptc:3"]
    (parent,) = [e for e in _by_ph(doc, "X") if e["name"] == "run_code"]
    for sub in subs:  # inside the run_code slice
        assert parent["ts"] <= sub["ts"]
        assert sub["ts"] + sub["dur"] <= parent["ts"] + parent["dur"]
    _assert_lanes_nest(doc)


def test_the_timeline_indents_sub_calls_under_their_call() -> None:
    from toolray_actors.cli._timeline import render_timeline

    lines = render_timeline(CODE_TRACE, width=20)
    assert lines[1].split()[:3] == ["1", "c1", "run_code"]
    subs = lines[2:]
    assert [line.split()[:3] for line in subs] == [
        ["+-", "read_file", "w1"],
        ["+-", "read_file", "w2"],
        ["+-", "write_file", "w1"],
    ]
    assert subs[2].endswith("INVALID_ARGS  (c1:ptc:3)")
    assert len({line.index("|") for line in lines[1:]}) == 1  # one scale for all rows


def test_ptc_records_of_an_event_log_nest_under_their_call() -> None:
    head = {"turn": 1, "step": 2}
    ok = {"isError": False, "content": []}
    sub = {"rootCallId": "c1", "parentCallId": "c1", "subCallId": "c1:ptc:1", "name": "grep",
           "arguments": {}}  # fmt: skip
    events = [
        {**head, "type": "tool/call", "callId": "c1", "name": "run_code", "arguments": "{}"},
        {**head, "type": "tool/ptc-dispatch-start", **sub},
        {**head, "type": "tool/ptc-dispatch", **sub, "isError": True, "content": []},
        {**head, "type": "tool/result", "callId": "c1", "result": ok},
    ]
    trace = events_to_trace(events)
    spans = {s["callId"]: s for s in trace if s["type"] == "call"}
    assert spans["c1:ptc:1"]["track"] == "turn 1 step 2 > c1 sub-calls"
    assert spans["c1:ptc:1"]["isError"] is True
    assert spans["c1"]["started"] < spans["c1:ptc:1"]["started"] < spans["c1"]["committed"]
    doc = trace_to_chrome(trace)
    assert "turn 1 step 2 > c1 sub-calls" in _thread_names(doc).values()


def test_trace_in_process_code_nests_the_sub_calls(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "code.json"
    assert main(["trace", "--in-process", "--scenario", "code", "--out", str(out)]) == 0
    doc = _load(out)
    subs = [e for e in _by_ph(doc, "X") if e["args"].get("parentCallId") == "c1"]
    assert sorted(e["name"] for e in subs) == ["grep", "read_file", "read_file", "write_file"]
    assert all(e["args"]["isError"] is False for e in subs)
    printed = capsys.readouterr().out
    assert printed.count("+-") == 4
