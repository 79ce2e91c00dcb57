"""``toolray bench --environments``: its measuring code on the session runtime, and its rows."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from toolray_actors.bench._env_bench import EnvOptions, run_environments
from toolray_actors.cli._env_cli import env_rows


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_every_part_measures_and_every_row_has_its_target(ray_runtime: Any) -> None:
    opts = EnvOptions(
        rounds=8, forks=2, fork_mb=1, instances=3, state_kb=4, parked=3, replay_scopes=4
    )
    said: list[str] = []
    report = run_environments(ray_runtime, opts, say=said.append)
    assert said == [
        f"{part}: done" for part in ("call", "open", "fork", "memory", "parked", "replay")
    ]
    assert json.loads(json.dumps(report)) == report
    call = report["call"]
    assert call["environment"]["n"] == call["stateless"]["n"] == 8
    assert all(
        report["fork"][f"{k}_intact"] for k in ("process_1kb", "process_big", "snapshot_big")
    )
    assert set(report["memory"]) == {"instances", "call", "shared", "fork_floor_mb"}
    assert 0 < report["memory"]["fork_floor_mb"] < 64
    assert report["parked"]["intact"] == 3
    assert report["replay"]["outcomes_match"]
    assert report["replay"]["states_match"]
    rows = env_rows(report)
    assert len(rows) == 8
    for what, measured, target, _, met in rows:
        assert what
        assert measured
        assert target
        assert met in (True, False)
        assert "nan" not in measured
    assert math.isfinite(report["call"]["ratio"])


def test_bad_options_are_refused_before_ray_starts() -> None:
    with pytest.raises(ValueError, match="--env-forks must be a count ≥ 0"):
        EnvOptions(forks=-1).check()
    with pytest.raises(ValueError, match="--env-parked must be a count ≥ 0"):
        EnvOptions(parked=True).check()  # type: ignore[arg-type]
