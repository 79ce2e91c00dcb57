"""A script's (or a notebook's) own classes in a batch's arguments: the same results on Ray.

Real driver process (``tests.actors._main_classes`` runs as ``__main__`` and starts its own
local Ray): arguments whose reading raises, a dict subclass and an unpicklable value each
fail or pass their own call exactly as in process (the dict subclass passes), and the batch
goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_calls_with_main_module_argument_objects_end_on_ray_as_in_process() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.actors._main_classes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0, done.stderr[-3000:]
    assert lines, done.stdout[-3000:]
    results = json.loads(lines[-1].removeprefix("RESULTS "))
    assert results["ray"] == results["core"]
    assert [error for error, _ in results["core"]] == [True, False, True, False]
    assert results["core"][0][1] == "boom iter"
