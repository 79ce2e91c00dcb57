"""Node loss on a simulated 3-node cluster (head + 2), in a subprocess with its own Ray."""

from __future__ import annotations

import pytest

from tests.actors._procs import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]


@pytest.mark.timeout(300)
def test_losing_the_node_of_a_busy_worker_gives_worker_lost_and_a_live_replacement() -> None:
    out = run_scenario("tests.actors._cluster_scenario")
    assert out["first_code"] == "WORKER_LOST", out
    assert out["second_error"] is False, out
    assert out["second_node"] != out["doomed_node"], out
