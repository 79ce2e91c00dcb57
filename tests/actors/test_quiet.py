"""Quiet: what toolray itself causes prints nothing, and Ray's own printing is left alone.

The workers toolray kills on purpose (the cancellation ladder) go through ``ray.kill``, which
Ray reports to nobody; shutting down prints nothing. A library patches nothing of Ray's in a
user's process: with Ray's defaults a tool's ``print()`` reaches the driver's output.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.actors._procs import ROOT, child_env
from toolray_actors.driver._quiet import is_noise, quiet_notices

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]

NOISE = ("(raylet)", "Traceback", "WARNING", "Error", "spare worker", "A worker died")


@pytest.mark.timeout(300)
def test_a_deliberate_kill_and_shutdown_print_nothing_and_tool_prints_show() -> None:
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
    out = proc.stdout
    assert "PRINTER UNTOUCHED True" in out
    assert "CODES ['TOOL_TIMEOUT', 'ok']" in out
    assert "KILLS 1" in out
    assert "DONE" in out
    assert "TOOL SAYS hi" in out + proc.stderr  # log_to_driver: the worker's stdout shows
    lines = (out + proc.stderr).splitlines()
    assert [line for line in lines if any(n in line for n in NOISE)] == []


def test_the_commands_quiet_window_routes_dead_worker_notices_and_restores_the_streams(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    notice = "\x1b[33m(raylet)\x1b[0m A worker died or was killed while executing a task"
    assert is_noise(notice)
    assert is_noise("(raylet, ip=10.0.0.2) The actor died unexpectedly before finishing")
    assert not is_noise("(pid=1234) A worker died or was killed")
    assert not is_noise("(raylet) some other notice")
    out, err = sys.stdout, sys.stderr
    with caplog.at_level("DEBUG", logger="toolray"), quiet_notices():
        assert sys.stdout is not out
        print(notice)
        print("(raylet) some other notice")
        print(notice, file=sys.stderr)
        print("a tool's line", file=sys.stderr)
    assert (sys.stdout, sys.stderr) == (out, err)
    captured = capsys.readouterr()
    assert captured.out == "(raylet) some other notice\n"
    assert captured.err == "a tool's line\n"
    assert caplog.messages == ["ray: A worker died or was killed while executing a task"] * 2
