"""Quiet (API-v2 §12): faults the runtime recovers from, and shutdown, print nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.actors._procs import ROOT, child_env

pytestmark = [pytest.mark.ray, pytest.mark.slow]

NOISE = ("(raylet)", "Traceback", "WARNING", "Error", "spare worker", "A worker died")


@pytest.mark.timeout(300)
def test_a_killed_worker_a_crash_a_dead_executor_and_shutdown_print_nothing() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.actors._noisy_script"],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CODES ['TOOL_TIMEOUT', 'WORKER_LOST']" in proc.stdout
    assert "AGAIN False" in proc.stdout
    assert "DONE" in proc.stdout
    lines = (proc.stdout + proc.stderr).splitlines()
    assert [line for line in lines if any(n in line for n in NOISE)] == []
