"""The soak's quick variant (issue 42, item 2): ``benchmarks/soak.py`` for 18 seconds.

It runs in a subprocess on an embedded Ray of its own, under the same mixed load as the
hour (hanging and crashing tools, environments, Code Mode, a rate-limited tool, scope
churn), with a 6 s mark and 2 s rests. The test checks the JSON's shape and the hard
invariants — every call one result, no environment instance lost, no process left after
the shutdown — never the RSS or timing figures, which seconds on a shared machine
cannot judge (the hour's run in ``benchmarks/RESULTS-soak.md`` does).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.actors._procs import ROOT, child_env

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]

CRITERIA = ("rss", "fds", "threads", "processes", "lost", "leftover")


@pytest.mark.timeout(300)
def test_a_short_soak_loses_nothing_and_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "soak.json"
    argv = ["--minutes", "0.3", "--mark-s", "6", "--rest-s", "2", "--sample-s", "3"]
    proc = subprocess.run(
        [sys.executable, "benchmarks/soak.py", *argv, "--json", str(out)],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    # 0: every criterion held; 1: one did not (RSS over seconds is no verdict)
    assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    verdicts, counts, samples = figures["verdicts"], figures["counts"], figures["samples"]

    # the shape the docs' chart and RESULTS-soak.md are drawn from
    assert set(CRITERIA) <= set(verdicts)
    assert all(isinstance(verdicts[k]["met"], bool) for k in CRITERIA)
    assert verdicts["met"] == all(verdicts[k]["met"] for k in CRITERIA)
    assert [s["rest"] for s in samples if s.get("rest")] == ["mark", "end"]
    assert [s["t"] for s in samples] == sorted(s["t"] for s in samples)
    for s in samples[1:]:
        assert {"actors", "processes", "call_processes", "calls", "phase"} <= set(s)
        for actor in s["actors"].values():
            assert {"kind", "rss", "fds", "threads", "processes"} <= set(actor)
    kinds = {a["kind"] for a in verdicts["actors"]}
    assert {"registry", "executor", "pool", "worker"} <= kinds  # the long-lived actors
    assert verdicts["processes"]["mark"] >= len(verdicts["actors"])

    # every lane ran, and every call got exactly one result
    assert set(counts["ok_by_lane"]) >= {"rollout", "env", "code", "rate", "churn"}
    assert counts["calls"] == counts["ok"] + counts["failed"] + counts["lost"]
    assert counts["lost"] == 0, counts["raised"]
    assert counts["raised"] == []
    assert counts["env"].get("lost_instances", 0) == 0
    assert counts["env"]["opened"] >= 1
    assert counts["env"]["scopes_disposed"] >= 1
    assert verdicts["lost"]["met"]

    # nothing of the run outlives its shutdown
    assert figures["processes_seen"] > len(verdicts["actors"])
    assert verdicts["leftover"] == {"processes": 0, "pids": [], "met": True}
