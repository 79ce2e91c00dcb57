"""``toolray bench --rollout`` keeps working: a tiny plan through toolray and two peers.

A smoke test (the figures belong to ``benchmarks/rollout.py``): the plan is the same for
every backend, each reports every call once, toolray's faulty calls fail with their codes
while its good calls succeed, and its namespaces are the session cluster's (nothing to
start but their actors). Bad options fail before Ray starts.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolray_actors.bench._rollout_plan import RolloutPlan, percentile, table

# A tiny plan whose draws hold a good call, a hanging one and a crashing one (seed 10); the
# deadline is generous so a loaded machine does not turn a good call into a timeout.
PLAN = RolloutPlan(
    trajectories=2,
    turns=2,
    calls_per_turn=2,
    hang_rate=0.2,
    crash_rate=0.2,
    hang_s=4.0,  # a peer that cannot stop a hung call waits it out
    timeout_ms=1500.0,
    kill_grace_ms=100.0,
    seed=10,
)


def test_the_plan_is_the_same_for_every_backend_and_holds_each_kind() -> None:
    calls = PLAN.calls()
    assert calls == PLAN.calls()  # seeded
    assert len(calls) == 8
    assert {c.kind for c in calls} == {"good", "hang", "crash"}
    assert [c.call_id for c in PLAN.turns_of(1)[0]] == ["t1-u0-c0", "t1-u0-c1"]
    assert percentile([3.0, 1.0, 2.0], 0.5) == 2.0
    assert percentile([], 0.99) == 0.0


def test_the_bound_is_the_slowest_trajectorys_longest_calls_turn_by_turn() -> None:
    def by_hand(hung_ms: float) -> float:
        def cost(kind: str, ms: float) -> float:
            return {"good": ms, "hang": hung_ms, "crash": 0.0}[kind]

        slowest = max(
            sum(max(cost(c.kind, c.ms) for c in turn) for turn in PLAN.turns_of(t))
            for t in range(PLAN.trajectories)
        )
        return 8 / (slowest / 1000)

    at_deadline = PLAN.bound_calls_per_s(PLAN.timeout_ms)
    killed_first = PLAN.bound_calls_per_s(PLAN.timeout_ms + PLAN.kill_grace_ms)
    assert at_deadline == pytest.approx(by_hand(1500.0))
    assert killed_first == pytest.approx(by_hand(1600.0))
    assert killed_first < at_deadline  # the plan holds a hung call on its slowest trajectory


@pytest.mark.ray
@pytest.mark.timeout(300)
async def test_a_tiny_rollout_runs_through_toolray_and_its_peers(ray_runtime: Any) -> None:
    from toolray_actors.cli._rollout import run_rollout

    reports = await run_rollout(ray_runtime.config, PLAN, ("toolray", "gather", "raw-ray"))
    assert [r.backend for r in reports] == ["toolray", "gather", "raw-ray"]
    kinds = [c.kind for c in PLAN.calls()]
    for report in reports:
        assert report.calls == 8, report
        assert report.good == kinds.count("good"), report
    ours = reports[0]
    assert ours.good_ok == ours.good, ours
    assert ours.faulty_failed == {
        "TOOL_TIMEOUT": kinds.count("hang"),
        "WORKER_LOST": kinds.count("crash"),
    }, ours
    assert (ours.no_result, ours.left_running) == (0, 0), ours
    gather = reports[1]
    assert gather.no_result == kinds.count("crash")  # a crash would have ended its process
    text = table(reports, PLAN)
    assert text.count("\n| ") == len(reports) + 1  # a row per backend, then the bound's
    assert f"\n| kill-first bound | - | - | - | - | - | {PLAN.kill_first_bound:.0f} | - |" in text


def test_an_unknown_backend_is_a_usage_error(capsys: Any) -> None:
    from toolray_actors.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["bench", "--rollout", "--backends", "toolray,celery"])
    assert exited.value.code == 2
    assert "unknown backend(s) celery" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--hang-rate", "0.9", "--crash-rate", "0.2"], "must not exceed 1"),
        (["--trajectories", "0"], "must be at least 1"),
    ],
)
def test_bad_rollout_options_fail_before_ray_starts(
    argv: list[str], message: str, capsys: Any
) -> None:
    from toolray_actors.cli import main

    assert main(["bench", "--rollout", *argv]) == 2
    assert message in capsys.readouterr().err
