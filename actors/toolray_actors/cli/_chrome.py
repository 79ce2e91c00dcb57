"""Batch traces as Chrome / Perfetto trace JSON (pure: no Ray, no clock, no files).

:func:`trace_to_chrome` turns a batch trace — the list ``BatchExecutor.execute(trace=…)``
fills, or ``ExecutorHandle.last_trace`` — into the JSON Object Format that
``chrome://tracing`` and https://ui.perfetto.dev open::

    {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}

- one process (``pid`` 1) with a ``scheduler`` track (``tid`` 0) and one track per worker
  (``ph: "M"`` ``thread_name`` / ``thread_sort_index`` metadata); calls that ran without a
  worker (in-process, or never dispatched) share one track, named by ``unassigned``;
- one complete slice (``ph: "X"``, ``ts``/``dur`` in µs since the batch started) per call,
  named after its tool, with ``args`` holding ``callId``, ``code``, ``isError``, ``mode``,
  ``index`` and ``worker`` (plus ``killed`` when the ladder killed the worker);
- instants (``ph: "i"``, process-wide) on the scheduler track for barriers (the start of
  each exclusive stage) and for aborts (where the scheduler stopped starting calls);
- a ``run_code`` call's sub-calls (its span's ``subCalls``) on a track of their own,
  ``<call id> run_code > sub-calls`` (with lanes where they overlap), sorted right after the
  call's track; each slice's ``args`` names its ``parentCallId`` and ``worker``.

Slices on one Chrome track must nest, but calls on one worker overlap freely (a worker runs
many bodies at once), so a worker whose calls overlap gets extra lanes: ``worker w1``,
``worker w1 #2``, … (sorted together).

:func:`events_to_trace` rebuilds a trace from a durable event log (``tool/call`` and
``tool/result`` records), which holds no timings: time is **logical**, one tick (shown as
1 ms) per record in log order, so a call spans from its ``tool/call`` record to its
``tool/result`` record. Calls of one batch overlap exactly when the scheduler started
later calls before committing earlier ones (a parallel group); a barrier shows as a call
that starts only after every earlier result. Each ``(turn, step)`` batch gets its own
track; the first ``ABORTED_BEFORE_DISPATCH`` result of a batch becomes an abort instant.
A ``run_code`` call's ``tool/ptc-dispatch-start`` / ``tool/ptc-dispatch`` records become its
sub-calls, on a track ``turn T step S > <call id> sub-calls`` beside the batch's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import SupportsFloat, TypedDict

__all__ = ("chrome_json", "events_to_trace", "trace_to_chrome")

_PID = 1
_SCHEDULER_TID = 0

Span = dict[str, object]
"""One record of a batch trace (a call's span, a stage, an abort), as JSON."""

Event = dict[str, object]
"""One Chrome trace event, as JSON."""


class ChromeTrace(TypedDict):
    """The JSON Object Format document."""

    traceEvents: list[Event]
    displayTimeUnit: str
    otherData: dict[str, str]


def _float(value: object) -> float:
    if isinstance(value, SupportsFloat | str):
        return float(value)
    raise TypeError(f"a trace time must be a number, not {value!r}")


def _index(span: Span) -> int:
    index = span["index"]
    if isinstance(index, int):
        return index
    raise TypeError(f"a span's index must be an int, not {index!r}")


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _us(seconds: object) -> float:
    return round(_float(seconds or 0.0) * 1e6, 3)


def _end(span: Span) -> float:
    for key in ("settled", "committed", "started"):
        if span.get(key) is not None:
            return _float(span[key])
    return 0.0


def _natural(text: str) -> list[int | str]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _track_of(span: Span, unassigned: str) -> str:
    if span.get("track"):
        return str(span["track"])
    if span.get("worker"):
        return f"worker {span['worker']}"
    return unassigned


def _lanes(spans: list[Span]) -> list[list[Span]]:
    """Greedy interval partition: no two spans of one lane overlap."""
    lanes: list[list[Span]] = []
    ends: list[float] = []
    for span in sorted(spans, key=lambda s: (_float(s.get("started") or 0.0), _index(s))):
        start = _float(span.get("started") or 0.0)
        for k, end in enumerate(ends):
            if end <= start:
                lanes[k].append(span)
                ends[k] = _end(span)
                break
        else:
            lanes.append([span])
            ends.append(_end(span))
    return lanes


def _metadata(tid: int, name: str, sort_index: int) -> list[Event]:
    return [
        {"ph": "M", "name": "thread_name", "pid": _PID, "tid": tid, "args": {"name": name}},
        {
            "ph": "M",
            "name": "thread_sort_index",
            "pid": _PID,
            "tid": tid,
            "args": {"sort_index": sort_index},
        },
    ]


def _sub_span(parent: Span, sub: Mapping[str, object]) -> Span:
    """A sub-call span, placed under its ``run_code`` call."""
    return {**sub, "index": parent.get("index"), "parentCallId": parent.get("callId")}


def _slice(span: Span, tid: int) -> Event:
    args: dict[str, object] = {
        "callId": span.get("callId"),
        "code": span.get("code"),
        "isError": span.get("isError"),
        "mode": span.get("mode"),
        "index": span.get("index"),
        "worker": span.get("worker"),
    }
    if span.get("killed"):
        args["killed"] = True
    if span.get("parentCallId"):
        args["parentCallId"] = span["parentCallId"]
    start = _us(span.get("started"))
    return {
        "ph": "X",
        "name": str(span.get("name", "?")),
        "cat": "tool",
        "pid": _PID,
        "tid": tid,
        "ts": start,
        "dur": max(0.0, round(_us(_end(span)) - start, 3)),
        "args": args,
    }


def _instant(event: Span) -> Event | None:
    args: dict[str, object]
    if event.get("type") == "abort":
        name, args = "abort", {"index": event.get("index")}
    elif event.get("type") == "stage" and event.get("kind") == "exclusive":
        name, args = "barrier", {"kind": "exclusive", "start": event.get("start")}
    else:
        return None
    return {
        "ph": "i",
        "name": name,
        "cat": name,
        "s": "p",
        "pid": _PID,
        "tid": _SCHEDULER_TID,
        "ts": _us(event.get("time")),
        "args": args,
    }


def trace_to_chrome(
    trace: Sequence[Span],
    *,
    process_name: str = "toolray batch",
    unassigned: str = "in-process",
    clock: str = "seconds since the batch started",
) -> ChromeTrace:
    """Chrome/Perfetto trace JSON (a plain, JSON-serializable dict) of one batch trace.

    Example:
        >>> trace = [{"type": "call", "index": 0, "callId": "c1", "name": "read_file",
        ...           "mode": "parallel", "started": 0.001, "settled": 0.121,
        ...           "committed": 0.122, "isError": False, "code": None, "worker": "w1"}]
        >>> out = trace_to_chrome(trace)
        >>> [e["dur"] for e in out["traceEvents"] if e["ph"] == "X"]
        [120000.0]
    """
    events: list[Event] = [
        {"ph": "M", "name": "process_name", "pid": _PID, "tid": 0, "args": {"name": process_name}},
        *_metadata(_SCHEDULER_TID, "scheduler", 0),
    ]
    tracks: dict[str, list[Span]] = {}
    order: dict[
        str, tuple[bool, list[int | str]] | tuple[bool, list[int | str], list[int | str]]
    ] = {}
    for span in trace:
        if span.get("type") == "call":
            track = _track_of(span, unassigned)
            tracks.setdefault(track, []).append(span)
            order.setdefault(track, (track == unassigned, _natural(track)))
            subs = [_sub_span(span, _mapping(sub)) for sub in _items(span.get("subCalls"))]
            if subs:
                name = f"{span.get('callId')} {span.get('name')} > sub-calls"
                tracks.setdefault(name, []).extend(subs)
                order.setdefault(name, (*order[track], _natural(name)))
    tid = _SCHEDULER_TID
    for track in sorted(tracks, key=order.__getitem__):
        for lane_no, lane in enumerate(_lanes(tracks[track]), 1):
            tid += 1
            name = track if lane_no == 1 else f"{track} #{lane_no}"
            events.extend(_metadata(tid, name, tid))
            events.extend(_slice(span, tid) for span in lane)
    events.extend(i for i in (_instant(e) for e in trace) if i is not None)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "toolray trace", "clock": clock},
    }


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def chrome_json(doc: ChromeTrace) -> str:
    """``doc`` as JSON text with one trace event per line (compact, diff-friendly)."""
    events = ",\n".join(_compact(e) for e in doc["traceEvents"])
    rest = "".join(f",{_compact(k)}:{_compact(v)}" for k, v in doc.items() if k != "traceEvents")
    return '{"traceEvents":[\n' + events + "\n]" + rest + "}\n"


def events_to_trace(events: Iterable[Mapping[str, object]]) -> list[Span]:
    """A logical-time trace of a durable event log (see the module docstring)."""
    trace: list[Span] = []
    open_spans: dict[tuple[object, object, object], Span] = {}
    batch_sizes: dict[tuple[object, object], int] = {}
    aborted: set[tuple[object, object]] = set()
    for tick, event in enumerate(events, 1):
        now = tick / 1000.0
        batch = (event.get("turn"), event.get("step"))
        key = (*batch, event.get("callId"))
        kind = event.get("type")
        if kind in ("tool/ptc-dispatch-start", "tool/ptc-dispatch"):
            _sub_event(trace, open_spans, batch, event, now)
        elif kind == "tool/call":
            index = batch_sizes[batch] = batch_sizes.get(batch, 0) + 1
            span = _log_span(batch, index - 1, event.get("callId"), event.get("name"), now)
            open_spans[key] = span
            trace.append(span)
        elif event.get("type") == "tool/result":
            found = open_spans.pop(key, None)
            if found is None:  # a result without its call record
                index = batch_sizes[batch] = batch_sizes.get(batch, 0) + 1
                found = _log_span(batch, index - 1, event.get("callId"), "?", now)
                trace.append(found)
            span = found
            _close(span, _mapping(event.get("result")), now)
            if span["code"] == "ABORTED_BEFORE_DISPATCH" and batch not in aborted:
                aborted.add(batch)
                trace.append({"type": "abort", "index": span["index"], "time": span["started"]})
    return trace


def _sub_event(
    trace: list[Span],
    open_spans: dict[tuple[object, object, object], Span],
    batch: tuple[object, object],
    event: Mapping[str, object],
    now: float,
) -> None:
    key = (*batch, event.get("subCallId"))
    span = open_spans.get(key)
    if span is None:
        span = _log_span(batch, -1, event.get("subCallId"), event.get("name"), now)
        turn, step = batch
        span["track"] = f"turn {turn} step {step} > {event.get('parentCallId')} sub-calls"
        span["parentCallId"] = event.get("parentCallId")
        open_spans[key] = span
        trace.append(span)
    if event.get("type") == "tool/ptc-dispatch":
        open_spans.pop(key, None)
        span["committed"] = now
        span["isError"] = bool(event.get("isError"))


def _log_span(
    batch: tuple[object, object], index: int, call_id: object, name: object, now: float
) -> Span:
    return {
        "type": "call",
        "index": index,
        "callId": call_id,
        "name": name,
        "mode": "logged",
        "started": now,
        "isError": None,
        "code": None,
        "track": "turn {} step {}".format(*batch),
    }


def _close(span: Span, wire: Mapping[str, object], now: float) -> None:
    span["committed"] = now
    span["isError"] = bool(wire.get("isError"))
    info = _mapping(_mapping(wire.get("error")).get("info"))
    span["code"] = info.get("code")


def _items(value: object) -> Iterable[object]:
    """A list field (``subCalls``), or nothing."""
    return value if isinstance(value, list | tuple) else ()
