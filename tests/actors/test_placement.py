"""Placement on a simulated 2-node cluster, in a subprocess with its own Ray.

One scenario (``_placement_scenario.py``) checks: a ``Placement(resources={"special": 1})``
tool runs on the node that offers ``special``; a tool whose resources no node has times out
at its deadline with ``TOOL_TIMEOUT`` (its calls wait in the executor, never in Ray); two
placements differing only in ``runtime_env`` get separate pools with their own env vars;
``Placement(pool=<name>)`` takes its ``[pools.<name>]`` table (resources included);
``rt.stats()`` lists every pool; ``shutdown()`` stops every actor of the namespace.
"""

from __future__ import annotations

import pytest

from tests.actors._procs import run_scenario

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]


@pytest.mark.timeout(300)
def test_placement_pools_resources_runtime_env_deadline_stats_and_shutdown() -> None:
    out = run_scenario("tests.actors._placement_scenario")
    assert out["special"]["node"] == out["nodes"]["special"], out
    assert out["plain"]["node"] == out["nodes"]["head"], out  # no "special" there
    timed_out = {
        "message": "tool call timed out after 1500ms",
        "info": {"name": "ToolTimeoutError", "code": "TOOL_TIMEOUT"},
    }
    assert out["nowhere_alone"] == timed_out, out
    assert 1.5 <= out["nowhere_s"] < 20, out  # at its deadline, not when workers appear
    assert out["nowhere"]["error"] == timed_out, out
    assert [out["env_a"]["env"], out["env_b"]["env"]] == ["a", "b"], out
    assert out["named"]["node"] == out["nodes"]["special"], out  # the table's resources
    assert out["plain"]["env"] is None, out
    pools = out["pools"]
    assert "toolray:pool:default" in pools, pools
    assert "toolray:pool:named-tabled" in pools, pools
    assert len([p for p in pools if p.startswith("toolray:pool:p-")]) == 4, pools
    assert out["left_after_shutdown"] == [], out
