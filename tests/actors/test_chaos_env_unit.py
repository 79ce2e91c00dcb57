"""The chaos campaign's environment invariants see what they look for (no Ray needed)."""

from __future__ import annotations

from typing import Any

from toolray import ToolErrorInfo, ToolExecutionFailure, ToolExecutionSuccess, ToolFailure
from toolray_actors.bench._chaos_env import Tally, check_env, env_held


def ok(count: int, gen: str = "g1") -> ToolExecutionSuccess:
    return ToolExecutionSuccess(value={"count": count, "gen": gen}, content=[])


def failed(code: str) -> ToolExecutionFailure:
    return ToolExecutionFailure(
        error=ToolFailure("lost", ToolErrorInfo("EnvironmentLostError", code)), content=[]
    )


def verdicts(*results: Any) -> list[Any]:
    tally = Tally(rt=None, scope="a")  # type: ignore[arg-type]  # _judge never uses it
    return [tally._judge(r).get("verdict", "failed") for r in results]


def test_an_unbroken_tally_is_ok() -> None:
    assert verdicts(ok(1), ok(2), ok(3)) == ["ok", "ok", "ok"]


def test_a_new_generation_nobody_opened_is_a_silent_reset() -> None:
    assert verdicts(ok(1), ok(2), ok(1, gen="g2")) == ["ok", "ok", "silent_reset"]


def test_a_count_that_skips_or_goes_back_is_a_lost_update() -> None:
    assert verdicts(ok(1), ok(3)) == ["ok", "lost_update"]
    assert verdicts(ok(1), ok(2), ok(2)) == ["ok", "ok", "lost_update"]
    assert verdicts(ok(2)) == ["lost_update"]  # a fresh instance starts at zero


def test_after_a_failure_the_count_may_have_moved_but_never_back() -> None:
    # the failed call may have counted before its fault: one more is not a lost update
    assert verdicts(ok(1), failed("WORKER_LOST"), ok(3)) == ["ok", "failed", "ok"]
    assert verdicts(ok(1), failed("WORKER_LOST"), ok(1)) == ["ok", "failed", "lost_update"]


def test_check_env_counts_and_env_held_judges() -> None:
    records = [
        {"agent": "a", "tally": {"ok": True, "verdict": "ok", "count": 1}},
        {"agent": "a", "tally": {"code": "ENVIRONMENT_LOST", "state": "lost", "reopened": True}},
        {"agent": "a", "tally": {"ok": True, "verdict": "ok", "count": 1, "fork": "ok"}},
        {"agent": "b", "tally": {"ok": True, "verdict": "ok", "count": 1}},
    ]
    out = check_env(records)
    assert out["env_ok"] == 3
    assert out["env_reopened"] == 1
    assert out["env_forks"] == 1
    assert out["env_recovered"] == out["env_agents"] == 2
    assert env_held(out)
    bad = [*records, {"agent": "b", "tally": {"code": "NO_CODE"}}]
    assert check_env(bad)["env_unexpected_codes"] == 1
    assert not env_held(check_env(bad))  # b's last step failed too: not recovered
    reset = [*records, {"agent": "b", "tally": {"ok": False, "verdict": "silent_reset"}}]
    assert check_env(reset)["env_silent_resets"] == 1
    assert not env_held(check_env(reset))
