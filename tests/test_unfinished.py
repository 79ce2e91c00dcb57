"""A pytest session that ends without finishing is explained: its last test and Ray's logs.

The trail is written by ``tests/conftest.py`` in a real pytest process whose test ends the
process the way Ray's driver does when its raylet is gone (``os._exit(1)``, no message);
``scripts/unfinished.py`` then names that test and prints the ends of the session's logs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests._scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
unfinished = load_script(ROOT / "scripts" / "unfinished.py", "scripts_unfinished")


def _session(tmp_path: Path, body: str) -> Path:
    test = tmp_path / "test_ends.py"
    test.write_text(f"import os\n\n\ndef test_passes():\n    pass\n\n\n{body}\n")
    trail = tmp_path / "trail"
    env = {**os.environ, "TOOLRAY_TEST_TRAIL": str(trail), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    plugins = ["-p", "pytest_timeout", "-p", "tests.conftest"]  # no others: a quick start
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugins, str(test)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        check=False,
        timeout=60,
    )
    return trail


def test_a_session_that_exits_mid_test_is_explained_with_that_test(tmp_path: Path) -> None:
    trail = _session(tmp_path, "def test_exits():\n    os._exit(1)")
    lines = trail.read_text().splitlines()
    assert lines[-1].endswith("test_ends.py::test_exits")
    assert "finished" not in lines
    said = unfinished.explain(trail, "1")
    assert "pytest ended (status 1) without finishing its session" in said
    assert said.splitlines()[1].startswith("  the last test started: ")
    assert said.splitlines()[1].endswith("test_ends.py::test_exits")
    assert "no Ray logs to show" in said  # this session started no Ray


def test_a_finished_session_ends_its_trail_with_finished(tmp_path: Path) -> None:
    trail = _session(tmp_path, "def test_fails():\n    assert False")
    lines = trail.read_text().splitlines()
    assert lines[-1] == "finished"  # a failing test is pytest's to report, not this script's
    assert unfinished.explain(trail, "1") == ""


def test_the_logs_of_the_session_ray_are_shown(tmp_path: Path) -> None:
    logs = tmp_path / "session" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text("".join(f"line {i}\n" for i in range(100)))
    (logs / "gcs_server.out").write_text("gcs started\n")
    (logs / "python-core-driver-01_4242.log").write_text("The program will terminate.\n")
    (logs / "python-core-driver-02_999.log").write_text("another driver\n")
    trail = tmp_path / "trail"
    trail.write_text(f"ray 4242 {tmp_path / 'session'}\ntest tests/x.py::test_y\n")
    said = unfinished.explain(trail, "1")
    assert "line 99" in said
    assert "line 74" not in said  # the last 25 lines
    assert "gcs started" in said
    assert "The program will terminate." in said
    assert "another driver" not in said  # only this session's driver
    assert unfinished.main([]) == 2
