"""Plain-text timelines and result lists for the command line (pure; no Ray, no TTY).

A timeline is drawn from a batch trace (``BatchExecutor.execute(trace=…)`` or
``ExecutorHandle.last_trace``): one row per call, columns at least two spaces apart, with
its worker, mode (``parallel`` / ``exclusive``), start–end in milliseconds since the batch
started, an ASCII bar scaled to the whole batch and its
status, with the stage boundaries and the abort point as separator rows. A ``run_code``
call's sub-calls (its span's ``subCalls``) follow it as indented ``+-`` rows on the same
scale, their ids at the end. Output is ASCII apart from the tools' own text, so it reads
the same in a terminal and in a CI log.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolray import ToolCallResult, ToolExecutionResult

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
    return f"{seconds * 1000:.1f}"


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


GAP = "  "
"""Between two columns: at least two spaces, whatever a cell holds."""


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
    rows: list[list[str] | str] = [["#", "call", "tool", "worker", "mode", "start", "end", scale]]
    stage_no = 0
    for index in [*sorted(by_index), None]:
        pending = markers.pop(index, []) if index is not None else _rest(markers)
        for event in pending:
            stage_no += event["type"] == "stage"
            rows.append(_marker(event, stage_no, len(spans)))
        if index is not None:
            rows.append(_cells(by_index[index], total, width, sub=False))
            rows.extend(
                _cells(sub, total, width, sub=True) for sub in by_index[index].get("subCalls") or ()
            )
    header, *body = rows
    return _align([[*header, "status"], *body])


def _align(rows: Sequence[list[str] | str]) -> list[str]:
    """Table rows with every column as wide as its widest cell, ``GAP`` apart.

    A ``str`` row (a stage or abort marker) spans the table as it is; the first column
    and the times are right-aligned, the last column (the status) is not padded.
    """
    tables = [r for r in rows if not isinstance(r, str)]
    columns = max(len(r) for r in tables) - 1
    widths = [max(len(r[i]) for r in tables if i < len(r)) for i in range(columns)]
    right = {0, 5, 6}
    out = []
    for row in rows:
        if isinstance(row, str):
            out.append(row)
            continue
        *leading, status = row
        cells = [
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(leading)
        ]
        out.append("  " + GAP.join([*cells, status]))
    return out


def _rest(markers: dict[int, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Markers past the last call (an abort after every call had started)."""
    return [event for key in sorted(markers) for event in markers[key]]


def _cells(span: dict[str, Any], total: float, width: int, *, sub: bool) -> list[str]:
    """One call's cells; a ``run_code`` sub-call (``sub``) is marked ``+-``, its id last."""
    start, end = float(span.get("started") or 0.0), span_end(span)
    worker = span.get("worker") or "-"
    mode = "not run" if span.get("mode") == "skipped" else span.get("mode", "?")
    bar = "" if mode == "not run" else _bar(start, end, total, width)
    number = "" if sub else str(span["index"] + 1)
    call = "+-" if sub else span["callId"]
    status = f"{status_of(span)}  ({span.get('callId')})" if sub else status_of(span)
    name = span.get("name", "?")
    return [number, call, name, worker, mode, _ms(start), _ms(end), bar, status]


def first_line(result: ToolExecutionResult) -> str:
    """The first line of a result's content (what the model reads first)."""
    for block in getattr(result, "content", ()) or ():
        if block.get("type") == "text":
            return next(iter(str(block.get("text", "")).splitlines()), "")
        return f"[{block.get('type')} block]"
    return ""


def code_of(result: ToolExecutionResult) -> str:
    """``ok`` or the failure's code."""
    if not result.is_error:
        return "ok"
    info = result.error.info
    return info.code if info is not None and info.code else "error"


def render_results(results: Iterable[ToolCallResult], *, limit: int = 78) -> list[str]:
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
