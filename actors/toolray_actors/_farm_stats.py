"""Per-tool and per-scope call statistics of an executor actor, merged by the driver.

Each executor actor observes every call it runs (:class:`FarmObserver`, an observer of the
core's seam): per tool, the calls that ended, the calls in flight, the failures by code, a
latency sketch (log buckets, about 5 % wide) and the calls of the last few seconds; per
scope, the same counts without the sketch, kept until the scope is disposed
(:meth:`FarmObserver.forget_scope`). Reading them is cheap — the executor sends its
samples, the driver adds them up (:func:`merge_tools`) and reads p50 / p99 off the merged
buckets. Every ended call is also handed to the executor's Ray metrics (batched, see
``_metrics``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

from toolray.lowlevel import BatchStart, CallEnd, CallStart, InstanceCounts

__all__ = (
    "OTHER_TOOL",
    "FarmObserver",
    "ScopeSample",
    "ToolSample",
    "ToolStats",
    "merge_scopes",
    "merge_tools",
    "percentile_ms",
    "sum_samples",
    "total_counts",
)

_GAMMA = 1.1
"""Bucket ``i`` (``i >= 1``) holds latencies in ``[_GAMMA**(i-1), _GAMMA**i)`` µs."""
_LOG_GAMMA = math.log(_GAMMA)
RATE_WINDOW_S = 5
"""``recent`` counts the calls that ended in the last this many seconds."""
_MAX_TOOLS = 256
OTHER_TOOL = "_other"
"""The name counted for tools past the first 256 an executor saw (bounded cardinality)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStats:
    """One tool over the namespace: calls that ended, in flight, failures, latency."""

    name: str
    calls: int
    in_flight: int
    failures: Mapping[str, int]
    """Failed calls by code (``TOOL_ERROR``: a failure without a code)."""
    p50_ms: float | None
    """The median call latency (start to final result), ``None`` before a call ended."""
    p99_ms: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSample:
    """What one executor knows of one tool (the driver merges these)."""

    name: str
    calls: int
    in_flight: int
    failures: dict[str, int]
    buckets: dict[int, int]
    recent: int
    """Calls that ended in the last :data:`RATE_WINDOW_S` seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScopeSample:
    """What one executor knows of one scope."""

    scope: str | None
    calls: int
    in_flight: int
    failures: int
    recent: int


@dataclass(eq=False, slots=True)
class _Counts:
    calls: int = 0
    in_flight: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    buckets: dict[int, int] = field(default_factory=dict)
    window: list[int] = field(default_factory=lambda: [0] * RATE_WINDOW_S)
    stamps: list[int] = field(default_factory=lambda: [0] * RATE_WINDOW_S)
    forgotten: bool = False
    """Its scope was disposed while calls of it ran: it goes as the last of them ends."""

    def ended(self, outcome: str, second: int) -> None:
        self.calls += 1
        self.in_flight -= 1
        if outcome != "ok":
            self.failures[outcome] = self.failures.get(outcome, 0) + 1
        slot = second % RATE_WINDOW_S
        if self.stamps[slot] != second:
            self.stamps[slot], self.window[slot] = second, 0
        self.window[slot] += 1

    def recent(self, second: int) -> int:
        return sum(
            n for n, s in zip(self.window, self.stamps, strict=True) if second - s < RATE_WINDOW_S
        )


def _bucket(seconds: float) -> int:
    micros = seconds * 1e6
    return 0 if micros < 1.0 else int(math.log(micros) / _LOG_GAMMA) + 1


@dataclass(eq=False, slots=True)
class _Open:
    tool: _Counts
    scope: _Counts
    scope_key: str | None
    name: str
    started: float


@final
class FarmObserver:
    """Counts every call of this process (an executor actor) by tool and by scope."""

    counts_only = True
    """It counts and times calls only: a chained batch may run under it (``Observation``)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tools: dict[str, _Counts] = {}
        self._scopes: dict[str | None, _Counts] = {}
        self.pending: list[tuple[str, str, float]] = []
        """Ended calls ``(tool, outcome, seconds)`` not yet handed to the Ray metrics."""

    def batch_started(self, batch: BatchStart) -> None:
        """Batches are not counted (their calls are)."""

    def batch_ended(self, batch: Any, error: BaseException | None) -> None:
        """Nothing to count."""

    def _tool(self, name: str) -> tuple[str, _Counts]:
        counts = self._tools.get(name)
        if counts is None:
            if len(self._tools) >= _MAX_TOOLS:
                name = OTHER_TOOL
                counts = self._tools.get(name)
            if counts is None:
                counts = self._tools[name] = _Counts()
        return name, counts

    def call_started(self, call: CallStart, parent: Any) -> _Open:
        """One more in flight."""
        name, tool = self._tool(call.name)
        scope = self._scopes.get(call.scope)
        if scope is None:
            scope = self._scopes[call.scope] = _Counts()
        scope.forgotten = False  # a scope of this name again (it was disposed, calls ran on)
        tool.in_flight += 1
        scope.in_flight += 1
        return _Open(tool, scope, call.scope, name, self._clock())

    def call_ended(self, call: _Open, end: CallEnd) -> None:
        """Counted, timed and queued for the metrics."""
        now = self._clock()
        seconds = max(0.0, now - call.started)
        second = int(now)
        call.tool.ended(end.outcome, second)
        call.scope.ended(end.outcome, second)
        if call.scope.forgotten and call.scope.in_flight == 0:
            del self._scopes[call.scope_key]
        bucket = _bucket(seconds)
        call.tool.buckets[bucket] = call.tool.buckets.get(bucket, 0) + 1
        self.pending.append((call.name, end.outcome, seconds))

    def forget_scope(self, scope: str) -> None:
        """Scope ``scope`` was disposed: its counts go (once its calls still running end).

        Scopes come and go (one per trajectory): kept, the counts of every scope ever seen
        would grow without bound.
        """
        counts = self._scopes.get(scope)
        if counts is None:
            return
        if counts.in_flight > 0:
            counts.forgotten = True
        else:
            del self._scopes[scope]

    def in_flight(self) -> dict[str, int]:
        """Calls in flight per tool (every tool seen, zeros included)."""
        return {name: counts.in_flight for name, counts in self._tools.items()}

    def tools(self) -> tuple[ToolSample, ...]:
        """A sample per tool seen."""
        second = int(self._clock())
        return tuple(
            ToolSample(
                name=name,
                calls=c.calls,
                in_flight=c.in_flight,
                failures=dict(c.failures),
                buckets=dict(c.buckets),
                recent=c.recent(second),
            )
            for name, c in self._tools.items()
        )

    def scopes(self) -> tuple[ScopeSample, ...]:
        """A sample per scope seen."""
        second = int(self._clock())
        return tuple(
            ScopeSample(
                scope=scope,
                calls=c.calls,
                in_flight=c.in_flight,
                failures=sum(c.failures.values()),
                recent=c.recent(second),
            )
            for scope, c in self._scopes.items()
        )


def percentile_ms(buckets: Mapping[int, int], q: float) -> float | None:
    """The ``q`` quantile (0..1) of a latency sketch, in milliseconds (``None``: empty)."""
    total = sum(buckets.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for index in sorted(buckets):
        seen += buckets[index]
        if seen >= rank:
            micros = 0.5 if index == 0 else _GAMMA ** (index - 0.5)
            return round(micros / 1000.0, 3)
    raise AssertionError("unreachable")


def sum_samples(samples: Iterable[ToolSample]) -> tuple[ToolSample, ...]:
    """Samples added up: one per tool (by name), in name order."""
    merged: dict[str, _Counts] = {}
    recent: dict[str, int] = {}
    for s in samples:
        into = merged.setdefault(s.name, _Counts())
        into.calls += s.calls
        into.in_flight += s.in_flight
        for code, n in s.failures.items():
            into.failures[code] = into.failures.get(code, 0) + n
        for index, n in s.buckets.items():
            into.buckets[index] = into.buckets.get(index, 0) + n
        recent[s.name] = recent.get(s.name, 0) + s.recent
    return tuple(
        ToolSample(
            name=name,
            calls=c.calls,
            in_flight=c.in_flight,
            failures=c.failures,
            buckets=c.buckets,
            recent=recent[name],
        )
        for name, c in sorted(merged.items())
    )


def merge_tools(samples: Iterable[ToolSample]) -> tuple[tuple[ToolStats, ...], dict[str, int]]:
    """Every executor's samples as one ``ToolStats`` per tool (by name), and recent calls."""
    summed = sum_samples(samples)
    stats = tuple(
        ToolStats(
            name=s.name,
            calls=s.calls,
            in_flight=s.in_flight,
            failures=dict(sorted(s.failures.items())),
            p50_ms=percentile_ms(s.buckets, 0.5),
            p99_ms=percentile_ms(s.buckets, 0.99),
        )
        for s in summed
    )
    return stats, {s.name: s.recent for s in summed}


def total_counts(counts: Iterable[InstanceCounts]) -> InstanceCounts:
    """Instance counts summed (over executors)."""
    rows = list(counts)
    names = [f.name for f in dataclasses.fields(InstanceCounts)]
    return InstanceCounts(**{n: sum(getattr(c, n) for c in rows) for n in names})


def merge_scopes(samples: Iterable[tuple[str, ScopeSample]]) -> list[dict[str, Any]]:
    """``(executor name, sample)`` pairs as one row per scope (a scope may move executors)."""
    rows: dict[str | None, dict[str, Any]] = {}
    for executor, s in samples:
        row = rows.setdefault(
            s.scope,
            {"scope": s.scope, "executors": [], "calls": 0, "in_flight": 0, "failures": 0},
        )
        row["executors"].append(executor)
        row["calls"] += s.calls
        row["in_flight"] += s.in_flight
        row["failures"] += s.failures
        row["calls_per_s"] = row.get("calls_per_s", 0.0) + s.recent / RATE_WINDOW_S
    return sorted(rows.values(), key=lambda r: (r["scope"] is not None, r["scope"] or ""))
