"""Farm numbers on Ray: ``rt.stats().tools``, ``toolray top --once --json``, the metrics.

The metrics are scraped from the session cluster's own Prometheus endpoint (every Ray node
serves one on its ``MetricsExportPort``); Ray exports on an interval, so the scrape polls
with a bound.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import ray

from tests import tools
from toolray import AbortController, TimeoutPolicy, ToolBatchInput, ToolCall
from toolray_actors import ToolStats
from toolray_actors.cli import main

pytestmark = pytest.mark.ray

WAIT_S = 30.0
SCRAPE_S = 90.0


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope, max_parallel_tool_calls=8)


async def _started(directory: Path, key: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not (directory / f"{key}.started").exists():
        assert time.monotonic() < deadline, f"never started: {key}"
        await asyncio.sleep(0.005)


def _tool(stats: Any, name: str) -> ToolStats:
    found = [t for t in stats.tools if t.name == name]
    assert len(found) == 1, [t.name for t in stats.tools]
    return found[0]


async def test_stats_tools_count_calls_failures_and_latency(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(tools.echo_tool("st_echo")))
    rt.owned.append(rt.registry.register(tools.failing_tool("st_fail", "harness")))
    rt.owned.append(rt.registry.register(tools.failing_tool("st_plain", "plain")))
    calls = [ToolCall(f"e{i}", "st_echo", {"text": str(i)}) for i in range(5)]
    calls += [ToolCall("f1", "st_fail", {}), ToolCall("f2", "st_fail", {})]
    calls += [ToolCall("p1", "st_plain", {})]
    await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    stats = await asyncio.to_thread(rt.stats)
    assert list(stats.tools) == sorted(stats.tools, key=lambda t: t.name)
    echo, fail, plain = (_tool(stats, n) for n in ("st_echo", "st_fail", "st_plain"))
    assert (echo.calls, echo.in_flight, dict(echo.failures)) == (5, 0, {})
    assert (fail.calls, dict(fail.failures)) == (2, {"ENOSPC": 2})
    assert dict(plain.failures) == {"TOOL_ERROR": 1}
    assert echo.p50_ms is not None
    assert echo.p99_ms is not None
    assert 0 < echo.p50_ms <= echo.p99_ms


async def test_top_once_json_shows_a_namespace_with_a_running_batch(
    rt: Any, scope_key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rt.owned.append(rt.registry.register(tools.gate_tool("st_gate", str(tmp_path))))
    rt.owned.append(rt.registry.register(tools.echo_tool("st_echo2")))
    ex = rt.executor(scope_key)
    await ex.execute_batch(_batch([ToolCall("e1", "st_echo2", {"text": "x"})], scope_key))
    running = asyncio.ensure_future(
        ex.execute_batch(_batch([ToolCall("g1", "st_gate", {"key": "held"})], scope_key))
    )
    try:
        await _started(tmp_path, "held")
        capsys.readouterr()
        code = await asyncio.to_thread(
            main, ["--config", "configs/ci.toml", "top", "--once", "--json"]
        )
        out = capsys.readouterr().out
    finally:
        (tmp_path / "held.open").touch()
        await asyncio.wait_for(running, WAIT_S)
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 1
    snap = json.loads(lines[0])
    assert sorted(snap) == ["actors", "environments", "namespace", "pools", "scopes", "tools"]
    counts = ["forks", "losses", "lost", "open", "opens", "parked", "parks", "restores"]
    assert sorted(snap["environments"]) == counts  # the instances' counts by state
    assert snap["namespace"] == rt.config.namespace
    scope = next(s for s in snap["scopes"] if s["scope"] == scope_key)
    assert scope["in_flight"] == 1
    assert scope["calls"] >= 1
    gate = next(t for t in snap["tools"] if t["name"] == "st_gate")
    assert gate["in_flight"] == 1
    echo = next(t for t in snap["tools"] if t["name"] == "st_echo2")
    assert echo["calls"] == 1
    assert echo["calls_per_s"] > 0
    assert echo["p50_ms"] is not None
    kinds = {a["kind"] for a in snap["actors"]}
    assert {"registry", "executor", "pool", "worker"} <= kinds
    assert all(a["rss_bytes"] > 0 for a in snap["actors"])
    assert snap["pools"]
    assert all(p["name"].startswith("toolray:pool:") for p in snap["pools"])
    assert all(p["workers"] >= 1 for p in snap["pools"])


def _scrape() -> str:
    node = next(n for n in ray.nodes() if n["Alive"])
    url = f"http://{node['NodeManagerAddress']}:{node['MetricsExportPort']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return str(reply.read().decode())


def _series(text: str, metric: str, **tags: str) -> list[float]:
    """Values of ``metric`` samples whose labels include ``tags``."""
    found = []
    for line in text.splitlines():
        if not line.startswith(metric + "{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.rindex("}")]))
        if all(labels.get(k) == v for k, v in tags.items()):
            found.append(float(line.rsplit(" ", 1)[1]))
    return found


async def test_call_metrics_reach_rays_prometheus_endpoint(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(tools.echo_tool("mt_echo")))
    rt.owned.append(rt.registry.register(tools.failing_tool("mt_fail", "harness")))
    calls = [ToolCall(f"e{i}", "mt_echo", {"text": "m"}) for i in range(3)]
    calls.append(ToolCall("f1", "mt_fail", {}))
    await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    wanted = {
        "ok": ("ray_toolray_calls_total", {"tool": "mt_echo", "outcome": "ok"}, 3.0),
        "failed": ("ray_toolray_calls_total", {"tool": "mt_fail", "outcome": "ENOSPC"}, 1.0),
        "count": ("ray_toolray_call_duration_seconds_count", {"tool": "mt_echo"}, 3.0),
    }
    deadline = time.monotonic() + SCRAPE_S
    while True:
        text = await asyncio.to_thread(_scrape)
        seen = {k: sum(_series(text, m, **tags)) for k, (m, tags, _) in wanted.items()}
        if all(seen[k] == want for k, (_, _, want) in wanted.items()):
            break
        assert time.monotonic() < deadline, f"not exported in {SCRAPE_S}s: {seen}"
        await asyncio.sleep(1.0)  # Ray exports on its own interval: poll, bounded
    in_flight = _series(text, "ray_toolray_calls_in_flight", tool="mt_echo")
    assert in_flight
    assert set(in_flight) == {0.0}
    assert _series(text, "ray_toolray_call_duration_seconds_bucket", tool="mt_echo", le="+Inf")
    for line in text.splitlines():  # bounded tags: never a scope or a call id
        if line.startswith("ray_toolray_"):
            assert scope_key not in line
            assert 'call_id="' not in line


async def test_kills_and_pool_sizes_reach_rays_prometheus_endpoint(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(tools.stubborn_tool("mt_block", "block", timeout_ms=200)))
    rt.owned.append(TimeoutPolicy().install(rt.registry))
    scraped = await asyncio.to_thread(_scrape)
    before = sum(_series(scraped, "ray_toolray_worker_kills_total", pool="default"))
    calls = [ToolCall("k1", "mt_block", {"seconds": 30})]
    out = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    assert out.results[0].result.error.info.code == "TOOL_TIMEOUT"  # killed at the deadline
    deadline = time.monotonic() + SCRAPE_S
    while True:
        text = await asyncio.to_thread(_scrape)
        kills = sum(_series(text, "ray_toolray_worker_kills_total", pool="default"))
        workers = _series(text, "ray_toolray_pool_workers", pool="default")
        if kills > before and workers:
            break
        assert time.monotonic() < deadline, f"not exported in {SCRAPE_S}s: {kills}, {workers}"
        await asyncio.sleep(1.0)  # Ray exports on its own interval: poll, bounded
    assert max(workers) >= 1


async def test_environment_events_reach_rays_prometheus_endpoint(rt: Any, scope_key: str) -> None:
    import cloudpickle

    from tests import envs

    cloudpickle.register_pickle_by_value(envs)
    rt.owned.append(rt.registry.register_environment(envs.counter_env(park_after_s=None)))
    rt.owned.append(rt.registry.register(envs.crash))
    h = rt.executor(scope_key).environment("counter")
    await h.open({"start": 1})
    await h.fork(f"{scope_key}-b")
    await rt.executor(scope_key).execute_batch(_batch([ToolCall("x", "crash", {})], scope_key))
    await rt.executor(f"{scope_key}-b").environment("counter").close()
    wanted = {
        event: ("ray_toolray_environment_events_total", {"environment": "counter", "event": event})
        for event in ("open", "fork", "lost", "close")
    }
    deadline = time.monotonic() + SCRAPE_S
    while True:
        text = await asyncio.to_thread(_scrape)
        seen = {k: sum(_series(text, m, **tags)) for k, (m, tags) in wanted.items()}
        if all(v >= 1 for v in seen.values()) and _series(
            text, "ray_toolray_environment_instances", state="lost"
        ):
            break
        assert time.monotonic() < deadline, f"not exported in {SCRAPE_S}s: {seen}"
        await asyncio.sleep(1.0)  # Ray exports on its own interval: poll, bounded
    for line in text.splitlines():  # bounded tags: never a scope
        if line.startswith("ray_toolray_environment"):
            assert scope_key not in line
