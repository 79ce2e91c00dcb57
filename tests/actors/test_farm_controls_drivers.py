"""Farm-wide rate limits: two driver processes, sharded executors, one bucket.

A ``ray.cluster_utils.Cluster`` head in a host subprocess; two drivers attach to it, each
with 2 executor shards and 4 agent scopes, and run 50 calls of one 25/s tool at once. The
bodies record their start times (wall clock, one machine); over every window of at least
a second the starts stay within ``25 × T + 1`` (10 % slack for dispatch jitter).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.actors._procs import Child, child_env
from tests.core._farm_helpers import windows_ok
from toolray import RateLimit

pytestmark = [pytest.mark.ray, pytest.mark.own_ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    host = Child(["toolray_actors.testing.cluster_host"], child_env())
    try:
        yield host.expect("ADDRESS ", timeout=180)
    finally:
        host.close(timeout=120)


@pytest.mark.timeout(600)
def test_two_drivers_sharing_a_25_per_second_tool_never_exceed_it(cluster: str) -> None:
    namespace = f"farm-rate-{os.getpid()}"
    with tempfile.TemporaryDirectory() as folder:
        drivers = [
            Child(
                ["tests.actors._farm_driver", cluster, namespace, folder, name, "48"], child_env()
            )
            for name in ("a", "b")
        ]
        try:
            for d in drivers:
                d.expect("READY", timeout=240)
            for d in drivers:
                assert d.proc.stdin is not None
                d.proc.stdin.write("go\n")
                d.proc.stdin.flush()
            done = [json.loads(d.expect("DONE ", timeout=240)) for d in drivers]
        finally:
            for d in drivers:
                d.close(timeout=60)
        starts = [
            float(line)
            for name in ("a", "b")
            for line in (Path(folder) / f"starts-{name}").read_text().split()
        ]
    assert [code for out in done for code in out["codes"]] == [None] * 96
    assert len(starts) == 96
    assert windows_ok(starts, RateLimit(25, burst=1), slack=0.1)
    span = max(starts) - min(starts)
    assert span >= 95 / 25 * 0.9  # the limit did hold them back: 96 calls need ~3.8 s
