"""Plain-text timelines and result lists for the command line (pure; no Ray, no TTY).

A timeline is drawn from a batch trace (``BatchExecutor.execute(trace=…)`` or
``ExecutorHandle.last_trace``): one row per call with its worker, mode, start–end in
milliseconds since the batch started, an ASCII bar scaled to the whole batch and its
status, with the stage boundaries and the abort point as separator rows. A ``run_code``
call's sub-calls (its span's ``subCalls``) follow it as indented ``+-`` rows on the same
scale, their ids at the end. Output is ASCII apart from the tools' own text, so it reads
the same in a terminal and in a CI log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = (
    "code_of",
    "first_line",
    "render_results",
    "render_timeline",
    "span_end",
    "status_of",
)

BAR_WIDTH = 32


def span_end(span: dict[str, Any]) -> float:
    """When a call stopped occupying its worker: settled, else committed, else started."""
    for key in ("settled", "committed", "started"):
        value = span.get(key)
        if value is not None:
            return float(value)
    return 0.0


def status_of(span: dict[str, Any]) -> str:
    """``ok``, or the failure's code (``error`` without one), noting what the ladder killed."""
    status = span.get("code") or "error" if span.get("isError") else "ok"
    killed = span.get("killed")
    if not killed:
        return status
    return f"{status} ({'process' if killed == 'process' else 'worker'} killed)"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.1f}"


def _bar(start: float, end: float, total: float, width: int) -> str:
    first = min(width - 1, int(start / total * width))
    last = max(first + 1, min(width, round(end / total * width)))
    return "|" + "." * first + "#" * (last - first) + "." * (width - last) + "|"


def _marker(event: dict[str, Any], stage_no: int, calls: int) -> str:
    at = f"{event['time'] * 1000:.1f} ms"
    if event["type"] == "abort":
        first = event["index"] + 1
        if first > calls:
            return f"  !! abort at {at}: every call had already started"
        which = f"call {first} was" if first == calls else f"calls {first}-{calls} were"
        return f"  !! abort at {at}: {which} never started"
    if event["kind"] == "exclusive":
        return f"  == barrier {stage_no}: exclusive, call {event['start'] + 1} alone, at {at}"
    return f"  -- stage {stage_no}: parallel group from call {event['start'] + 1}, at {at}"


def render_timeline(trace: Sequence[dict[str, Any]], *, width: int = BAR_WIDTH) -> list[str]:
    """The rows of one batch's timeline (empty trace: one line saying so)."""
    spans = [e for e in trace if e.get("type") == "call"]
    if not spans:
        return ["  (no trace recorded for this batch)"]
    every = [*spans, *(sub for s in spans for sub in s.get("subCalls") or ())]
    total = max(max(span_end(s) for s in every), 1e-6)
    by_index = {s["index"]: s for s in spans}
    markers: dict[int, list[dict[str, Any]]] = {}
    for event in trace:
        if event.get("type") in ("stage", "abort"):
            key = event["start"] if event["type"] == "stage" else event["index"]
            markers.setdefault(key, []).append(event)
    right = f"{total * 1000:.0f} ms"
    scale = f"0 ms{right:>{width - 2}}"
    lines = [
        f"  {'#':>2}  {'call':<5} {'tool':<11} {'worker':<7}{'mode':<10}"
        f"{'start':>7} {'end':>7}  {scale}  status"
    ]
    stage_no = 0
    for index in [*sorted(by_index), None]:
        pending = markers.pop(index, []) if index is not None else _rest(markers)
        for event in pending:
            stage_no += event["type"] == "stage"
            lines.append(_marker(event, stage_no, len(spans)))
        if index is not None:
            lines.append(_row(by_index[index], total, width))
            lines.extend(
                _sub_row(sub, total, width) for sub in by_index[index].get("subCalls") or ()
            )
    return lines


def _rest(markers: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Markers past the last call (an abort after every call had started)."""
    return [event for key in sorted(markers) for event in markers[key]]


def _row(span: dict[str, Any], total: float, width: int) -> str:
    start, end = float(span.get("started") or 0.0), span_end(span)
    worker = span.get("worker") or "-"
    mode = "not run" if span.get("mode") == "skipped" else span.get("mode", "?")
    bar = " " * (width + 2) if mode == "not run" else _bar(start, end, total, width)
    return (
        f"  {span['index'] + 1:>2}  {span['callId']:<5} {span['name']:<11} {worker:<7}"
        f"{mode:<10}{_ms(start)} {_ms(end)}  {bar}  {status_of(span)}"
    )


def _sub_row(span: dict[str, Any], total: float, width: int) -> str:
    """One sub-call of a ``run_code`` call, under it on the same columns and scale."""
    start, end = float(span.get("started") or 0.0), span_end(span)
    worker = span.get("worker") or "-"
    return (
        f"  {'':>2}  {'+-':<5} {span.get('name', '?'):<11} {worker:<7}{span.get('mode', '?'):<10}"
        f"{_ms(start)} {_ms(end)}  {_bar(start, end, total, width)}  {status_of(span)}"
        f"  ({span.get('callId')})"
    )


def first_line(result: Any) -> str:
    """The first line of a result's content (what the model reads first)."""
    for block in getattr(result, "content", ()) or ():
        if block.get("type") == "text":
            lines = str(block.get("text", "")).splitlines()
            return lines[0] if lines else ""
        return f"[{block.get('type')} block]"
    return ""


def code_of(result: Any) -> str:
    """``ok`` or the failure's code."""
    if not result.is_error:
        return "ok"
    info = result.error.info
    return info.code if info is not None and info.code else "error"


def render_results(results: Iterable[Any], *, limit: int = 78) -> list[str]:
    """``call id  status  first line of content`` per result, plus any failure reason."""
    lines = []
    for item in results:
        result = item.result
        text = first_line(result)
        text = text if len(text) <= limit else text[: limit - 3] + "..."
        lines.append(f"  {item.call_id:<5} {code_of(result):<24} -> {text}")
        info = getattr(getattr(result, "error", None), "info", None)
        if info is not None and info.reason:
            lines.append(f"  {'':<5} {'':<24}    reason: {info.reason}")
    return lines
