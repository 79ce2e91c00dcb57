"""The farm's numbers without Ray: counting, sketches, merging, top's picture and options."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from typing import Any

import pytest
from rich.console import Console

from toolray.lowlevel import CallEnd, CallStart, InstanceCounts, TraceParent
from toolray.testing import FakeClock
from toolray_actors._farm_stats import (
    OTHER_TOOL,
    FarmObserver,
    merge_tools,
    percentile_ms,
)
from toolray_actors._stats import ActorStats, PoolStats
from toolray_actors._tracing import SpanRecord, SpanRecorder
from toolray_actors.cli import main
from toolray_actors.cli._top_view import render, snapshot
from toolray_actors.control._retired import Retired
from toolray_actors.driver._stats_collect import Gathered
from toolray_actors.execution._executor_actor import ExecutorStats


def _start(name: str, scope: str | None = "a") -> CallStart:
    return CallStart(call_id="c", name=name, scope=scope)


def _run(farm: FarmObserver, clock: FakeClock, name: str, ms: float, outcome: str = "ok") -> None:
    handle = farm.call_started(_start(name), None)
    clock.advance(ms / 1000)
    farm.call_ended(handle, CallEnd(outcome=outcome))


def test_the_farm_observer_counts_in_flight_failures_and_latency() -> None:
    clock = FakeClock()
    farm = FarmObserver(clock.now)
    for ms in (1, 2, 3, 4, 100):
        _run(farm, clock, "t", ms)
    _run(farm, clock, "t", 5, "TOOL_TIMEOUT")
    held = farm.call_started(_start("t", "b"), None)
    (sample,) = farm.tools()
    assert (sample.calls, sample.in_flight, sample.failures) == (6, 1, {"TOOL_TIMEOUT": 1})
    assert sample.recent == 6
    (stats,), recent = merge_tools([sample, sample])
    assert (stats.calls, stats.in_flight, dict(stats.failures)) == (12, 2, {"TOOL_TIMEOUT": 2})
    assert recent == {"t": 12}
    assert stats.p50_ms is not None
    assert stats.p99_ms is not None
    assert stats.p50_ms == pytest.approx(3.0, rel=0.06)  # within a bucket's width
    assert stats.p99_ms == pytest.approx(100.0, rel=0.06)
    scopes = {s.scope: s for s in farm.scopes()}
    assert (scopes["a"].calls, scopes["a"].failures, scopes["b"].in_flight) == (6, 1, 1)
    assert [p[:2] for p in farm.pending] == [("t", "ok")] * 5 + [("t", "TOOL_TIMEOUT")]
    farm.call_ended(held, CallEnd(outcome="ok"))
    assert farm.in_flight() == {"t": 0}


def test_a_disposed_scopes_counts_go_once_its_last_call_ended() -> None:
    clock = FakeClock()
    farm = FarmObserver(clock.now)
    _run(farm, clock, "t", 1)  # scope "a"
    held = farm.call_started(_start("t", "b"), None)
    farm.forget_scope("a")
    farm.forget_scope("b")
    farm.forget_scope("never-seen")
    assert [s.scope for s in farm.scopes()] == ["b"]  # a call of it still runs
    farm.call_ended(held, CallEnd(outcome="ok"))
    assert farm.scopes() == ()
    (sample,) = farm.tools()  # the tool's counts stay
    assert (sample.calls, sample.in_flight) == (2, 0)


def test_a_scope_used_again_after_its_dispose_keeps_its_counts() -> None:
    clock = FakeClock()
    farm = FarmObserver(clock.now)
    held = farm.call_started(_start("t", "a"), None)
    farm.forget_scope("a")
    _run(farm, clock, "t", 1)  # a scope "a" again, while the old call runs
    farm.call_ended(held, CallEnd(outcome="ok"))
    (scope,) = farm.scopes()
    assert (scope.scope, scope.calls, scope.in_flight) == ("a", 2, 0)


def test_rates_forget_calls_older_than_the_window() -> None:
    clock = FakeClock()
    farm = FarmObserver(clock.now)
    _run(farm, clock, "t", 1)
    clock.advance(60)
    (sample,) = farm.tools()
    assert (sample.calls, sample.recent) == (1, 0)


def test_percentiles_of_an_empty_sketch_and_too_many_tools() -> None:
    assert percentile_ms({}, 0.5) is None
    clock = FakeClock()
    farm = FarmObserver(clock.now)
    for i in range(300):
        _run(farm, clock, f"tool-{i}", 1)
    names = {s.name for s in farm.tools()}
    assert len(names) == 257
    assert OTHER_TOOL in names


def test_the_span_recorder_gives_children_their_parents_span() -> None:
    records: list[SpanRecord] = []
    batch_span = TraceParent(0xABC, 0x1)
    recorder = SpanRecorder(batch_span, records.append)
    batch = recorder.batch_started(None)  # type: ignore[arg-type]
    outer = recorder.call_started(_start("outer"), batch)
    inner = recorder.call_started(CallStart(call_id="c:sub:1", name="in", scope="a"), outer)
    recorder.call_ended(inner, CallEnd(outcome="ok"))
    recorder.call_ended(outer, CallEnd(outcome="TOOL_ERROR", message="boom"))
    first, second = records
    assert (first.parent, second.parent) == (outer.trace, batch_span)
    assert first.span.trace_id == second.span.trace_id == 0xABC
    assert (second.outcome, second.message) == ("TOOL_ERROR", "boom")
    assert second.started_ns <= second.ended_ns


def _pool() -> Any:
    return PoolStats(
        name="toolray:pool:default",
        workers=2,
        spares=1,
        kills=3,
        deaths=0,
        replacements=3,
        version=7,
        child_kills=5,
        children=4,
    )


def _gathered() -> Gathered:
    clock = FakeClock()
    farm = FarmObserver(clock.now)
    _run(farm, clock, "search", 12)
    _run(farm, clock, "search", 20, "WORKER_LOST")
    farm.call_started(_start("fetch", None), None)
    executor = ExecutorStats(
        scope=None, pid=1, rss_bytes=1, batches=1, calls=3, in_flight=1, aborts=0,
        interrupts=0, kills=0, workers_lost=1, registry_seq=0, contributions=0,
        tools=farm.tools(), scope_calls=farm.scopes(),
    )  # fmt: skip
    actor = ActorStats(kind="executor", name="toolray:executor:a", pid=1, node_id="n",
                       rss_bytes=2**20, scopes=2)  # fmt: skip
    return Gathered(
        namespace="ns",
        executors=[("toolray:executor:shard-0", executor)],
        pools=[("toolray:pool:default", _pool())],
        actors=[actor],
    )


def test_tops_snapshot_has_its_keys_and_renders() -> None:
    snap = snapshot(_gathered())
    assert sorted(snap) == ["actors", "environments", "namespace", "pools", "scopes", "tools"]
    json.dumps(snap)  # JSON-ready
    tools = {t["name"]: t for t in snap["tools"]}
    assert tools["search"]["failures"] == {"WORKER_LOST": 1}
    assert tools["fetch"]["in_flight"] == 1
    assert {s["scope"] for s in snap["scopes"]} == {"a", ""}
    assert snap["actors"][0]["rss_bytes"] == 2**20
    assert snap["pools"][0]["name"] == "toolray:pool:default"
    assert (snap["pools"][0]["kills"], snap["pools"][0]["child_kills"]) == (3, 5)
    out = io.StringIO()
    Console(file=out, width=150).print(render(snap))
    text = out.getvalue()
    words = ("Scopes", "Tools", "Pools", "Actors", "search", "WORKER_LOST:1", "(global)")
    for word in (*words, "proc kills", "call procs"):
        assert word in text


def test_what_exited_executors_counted_stays_in_tops_totals() -> None:
    live = _gathered()
    (_, executor), *_ = live.executors
    held = InstanceCounts(open=2, parked=1, lost=1, opens=5, losses=1)
    retired = Retired()
    retired.add(replace(executor, environments=held, kills=2))
    retired.add(replace(executor, environments=held))
    last = retired.total
    assert (last.kills, last.workers_lost, last.calls, last.in_flight) == (2, 2, 6, 0)
    assert last.environments == InstanceCounts(opens=10, losses=2)  # states are not held
    alone = {t["name"]: t for t in snapshot(live)["tools"]}
    live.retired = last
    snap = snapshot(live)
    tools = {t["name"]: t for t in snap["tools"]}
    assert tools["search"]["calls"] == 3 * alone["search"]["calls"]
    assert tools["search"]["failures"] == {"WORKER_LOST": 3}
    assert tools["fetch"]["in_flight"] == alone["fetch"]["in_flight"] == 1  # none exited
    assert (snap["environments"]["opens"], snap["environments"]["open"]) == (10, 0)


@pytest.mark.parametrize("interval", ["0", "-1", "soon"])
def test_top_refuses_a_bad_interval(interval: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["top", "--interval", interval])
    assert stop.value.code == 2
    assert "--interval" in capsys.readouterr().err
