"""The short chaos campaign (issue 15): random SIGKILLs of call processes, workers,
executors, pool managers, the registry and token buckets under load from two drivers, with
the farm controls in every batch and a hostile tenant attacking from a scope of its own;
every invariant must hold (fixed seed), no collateral damage included."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.actors._procs import ROOT, child_env

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]


@pytest.mark.timeout(400)
def test_a_short_chaos_campaign_loses_nothing_and_reruns_nothing(tmp_path: Path) -> None:
    out = tmp_path / "chaos.json"
    proc = subprocess.run(
        [
            sys.executable,
            "benchmarks/chaos.py",
            "--seconds",
            "15",
            "--every",
            "1.5",
            "--drivers",
            "2",
            "--agents",
            "2",
            "--calls",
            "5",
            "--seed",
            "7",
            "--kinds",
            "child,instance,worker,executor,pool,registry,bucket",
            "--json",
            out,
        ],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=380,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["faults_total"] >= 2, figures  # about one per 1.5 s on a quiet machine
    assert figures["raised"] == 0
    assert figures["lost"] == 0
    assert figures["re_run"] == 0
    assert figures["collateral"] == 0  # a fault failed only the calls of the process it killed
    assert figures["success_not_exactly_once"] == 0
    assert figures["log_problems"] == 0
    assert figures["agents_recovered"] == figures["agents"] == 4
    # the farm controls in the same batches: retries on the record, limits held
    assert figures["retries_unrecorded"] == 0
    assert figures["retried_not_idempotent"] == 0
    assert figures["rate_limited_starts"] > 0
    assert figures["rate_windows_over"] == 0
    # every agent's environment: each loss heard, never reset or rolled back behind its back,
    # forks where the tally stood, and every agent's tally going again at the end
    assert figures["env_ok"] > 0
    assert figures["env_recovered"] == figures["env_agents"] == 4
    for key in ("env_silent_resets", "env_lost_updates", "env_forks_wrong", "env_unexpected_codes"):
        assert figures[key] == 0, (key, figures)
    # a hostile tenant attacked the farm meanwhile: no other tenant's value or argument
    # changed, no smuggled object was unpickled, no daemon of its outlived its call
    assert figures["hostile_batches"] > 0
    for key in (
        "hostile_misordered",
        "hostile_revivers_ran",
        "hostile_leaks",
        "hostile_daemons_alive",
        "foreign_values",
    ):
        assert figures[key] == 0, (key, figures)
