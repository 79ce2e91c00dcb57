"""``toolray bench``: the measuring code path on the session runtime, and its options."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests._scripts import load_script
from toolray_actors.bench._rawray import GroupShape, RawStage, stages_of
from toolray_actors.cli import _bench

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.ray
def test_bench_reports_toolray_raw_and_ratio_and_writes_json_and_png(
    ray_runtime: Any, tmp_path: Path
) -> None:
    options = _bench.BenchOptions(
        calls=20,
        repetitions=1,
        shapes=(GroupShape.parse("safe"), GroupShape.parse("mixed:3+1")),
        json_path=tmp_path / "bench.json",
        png_path=tmp_path / "bench.png",
    )
    seen: list[str] = []
    report = _bench.run_bench(ray_runtime, options, advance=seen.append)

    assert len(seen) == _bench.steps(options, 1)  # one progress step per batch
    data = json.loads((tmp_path / "bench.json").read_text(encoding="utf-8"))
    assert data == json.loads(json.dumps(report))
    assert set(data["machine"]) >= {"nproc", "python", "ray"}
    workers = ray_runtime.config.pool.size
    assert [(r["workers"], r["shape"]) for r in data["results"]] == [
        (workers, "safe"),
        (workers, "mixed:3+1"),
    ]
    for row in data["results"]:
        assert row["calls"] == 20
        for side in ("toolray", "raw"):
            figures = row[side]
            assert figures["calls_per_s"] > 0
            assert len(figures["wall_ms"]) == 1
            assert {"p50_ms", "p95_ms"} <= set(figures)
        for side in ("toolray", "raw"):  # per-call latency on both sides (toolray: its trace)
            assert row[side]["latency_samples"] == 20
            assert 0 < row[side]["p50_ms"] <= row[side]["p95_ms"]
        assert row["ratio"] == pytest.approx(
            row["toolray"]["calls_per_s"] / row["raw"]["calls_per_s"]
        )
    assert (tmp_path / "bench.png").read_bytes()[:8] == PNG_SIGNATURE


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("safe", [False] * 5),
        ("exclusive", [True] * 5),
        ("mixed:2+1", [False, False, True, False, False]),
        ("mixed:1+2", [False, True, True, False, True]),
    ],
)
def test_group_shapes_mark_the_exclusive_calls(text: str, flags: list[bool]) -> None:
    assert GroupShape.parse(text).exclusive_flags(5) == flags


def test_stages_follow_the_scheduler_runs_and_barriers() -> None:
    flags = GroupShape.parse("mixed:3+2").exclusive_flags(9)
    assert stages_of(flags) == [
        RawStage(True, 3),
        RawStage(False, 1),
        RawStage(False, 1),
        RawStage(True, 3),
        RawStage(False, 1),
    ]


@pytest.mark.parametrize("text", ["mixed", "mixed:9", "mixed:a+1", "mixed:0+0", "parallel"])
def test_a_bad_group_shape_is_a_usage_error(text: str, capsys: Any) -> None:
    from toolray_actors.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--group-shape", text])
    assert exit_info.value.code == 2
    assert "group shape" in capsys.readouterr().err


def test_impossible_numbers_fail_before_ray_starts(capsys: Any) -> None:
    from toolray_actors.cli import main

    assert main(["bench", "--calls", "0"]) == 2
    assert "--calls and --repetitions must be at least 1" in capsys.readouterr().err


@pytest.mark.ray
async def test_one_call_latency_and_cpu_are_taken_beside_the_bare_and_the_body_two_hop_calls(
    ray_runtime: Any,
) -> None:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_perf.py"
    module = load_script(path, "_bench_perf_smoke")

    out = await module.one_call(ray_runtime, 3)
    cpu = await module.cpu_split(ray_runtime, 3)

    assert out["rounds"] == 3
    for name in ("toolray", "bare", "two_hop", "one_hop"):
        assert 0 < out[name]["p50_ms"] <= out[name]["p99_ms"], name
    assert out["ratio"] == out["toolray"]["p50_ms"] / out["bare"]["p50_ms"]  # the reference
    assert out["ratio_body"] == out["toolray"]["p50_ms"] / out["two_hop"]["p50_ms"]
    assert cpu["rounds"] == 3
    assert set(cpu["toolray"]) == {"driver", "executor", "workers", "call processes"}
    assert set(cpu["bare"]) == {"driver", "relay actor", "worker"}
    assert min(*cpu["toolray"].values(), *cpu["bare"].values()) >= 0
    (row, _, cpu_row, *_) = module.rows(
        {f"latency-{iso}": out for iso in ("call", "shared")}
        | {f"cpu-{iso}": cpu for iso in ("call", "shared")}
        | {f"throughput-{iso}": _TP for iso in ("call", "shared")}
        | {f"{shape}-{iso}": _TP for shape in module.BARRIERS for iso in ("call", "shared")}
    )
    assert row.startswith('| one-call batch round trip, isolation "call"')
    assert f"| {out['ratio']:.2f}× | ≤ 1.5× |" in row
    assert "bare two-hop" in row
    assert cpu_row.startswith('| CPU per one-call batch, isolation "call"')
    assert f"({out['ratio_body']:.2f}×)" in row


_SIDE = {"calls_per_s": 1.0, "wall_ms_median": 1.0}
_TP = {"ratio": 1.0, "toolray": _SIDE, "raw": _SIDE}


# ---------------------------------------------------------------------- --scopes
@pytest.mark.ray
async def test_bench_scopes_measures_both_modes_side_by_side(
    ray_runtime: Any, sharded_runtime: Any
) -> None:
    from toolray_actors.bench._scopes import echo_tool, measure_scopes
    from toolray_actors.cli._scopes_cli import scopes_table

    rows = {}
    for rt in (ray_runtime, sharded_runtime):  # the session's namespaces: nothing to start
        dispose = rt.registry.register(echo_tool())
        try:
            row = await measure_scopes(rt, 2, 2)
        finally:
            dispose()
        rows[row["mode"]] = row
    assert set(rows) == {"per_scope", "sharded"}
    for mode, row in rows.items():
        assert row["all_right"] is True, mode
        assert row["calls"] == 4
        assert min(row["start_s"], row["wall_s"], row["again_s"], row["executor_rss_mb"]) > 0
        assert row["control_rss_mb"] >= row["executor_rss_mb"]  # the executors are control
        assert row["control_actors"] > row["executor_actors"]  # …and so are registry, pool
        assert row["rss_per_executor_mb"] > 0
        assert row["hosted_scopes"] >= 2, mode  # a shard may also host other tests' scopes
    assert rows["per_scope"]["executor_actors"] == 2  # one per agent scope
    assert rows["sharded"]["executor_actors"] in (1, 2)  # the shards the two scopes map to
    report = {"options": {"scope_calls": 2}, "scopes": list(rows.values()), "noop": []}
    assert len(scopes_table(report)) == 1  # no no-op table when it was not measured


def test_bench_scopes_skips_per_scope_rows_over_the_limit() -> None:
    from toolray_actors.bench._scopes import ScopesOptions, run_scopes

    opts = ScopesOptions(scopes=(500,), modes=("per_scope",), noop_calls=0, per_scope_max=100)
    report = run_scopes(None, opts)  # type: ignore[arg-type]  # nothing to start
    assert "--per-scope-max 100" in report["scopes"][0]["skipped"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scopes", "10", "--modes", "per_agent"], "unknown executors mode"),
        (["--scopes", "10", "--shards", "0"], "must be at least 1"),
    ],
)
def test_bad_scopes_options_fail_before_ray_starts(
    argv: list[str], message: str, capsys: Any
) -> None:
    from toolray_actors.cli import main

    assert main(["bench", *argv]) == 2
    assert message in capsys.readouterr().err
