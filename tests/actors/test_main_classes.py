"""A script's (or a notebook's) own classes in a batch's arguments: the same results on Ray.

Real driver process (``tests.actors._main_classes`` runs as ``__main__`` and starts its own
local Ray): arguments whose reading raises, a dict subclass and an unpicklable value each
fail or pass their own call exactly as in process (the dict subclass passes), and the batch
goes on.
"""

from __future__ import annotations

import pytest

from tests.actors._procs import run_scenario


@pytest.mark.ray
@pytest.mark.timeout(240)
def test_calls_with_main_module_argument_objects_end_on_ray_as_in_process() -> None:
    results = run_scenario("tests.actors._main_classes", timeout=200)
    assert results["ray"] == results["core"]
    assert [error for error, _ in results["core"]] == [True, False, True, False]
    assert results["core"][0][1] == "boom iter"
