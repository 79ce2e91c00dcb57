"""Node loss on a simulated 3-node cluster (head + 2), in a subprocess with its own Ray."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_losing_the_node_of_a_busy_worker_gives_worker_lost_and_a_live_replacement() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.run(
        [sys.executable, "-m", "tests.actors._cluster_scenario"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert lines, proc.stdout[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    assert out["first_code"] == "WORKER_LOST", out
    assert out["second_error"] is False, out
    assert out["second_node"] != out["doomed_node"], out
