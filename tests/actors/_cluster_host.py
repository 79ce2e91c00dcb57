"""A Ray cluster owned by this process (``ray.cluster_utils.Cluster``), for multi-driver tests.

Prints ``ADDRESS <gcs address>`` once the head is up, then serves until its stdin closes
(the test's end), and shuts the cluster down. Usage: ``python -m tests.actors._cluster_host``.
"""

from __future__ import annotations

import sys

from ray.cluster_utils import Cluster

HEALTH = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 2,
    "health_check_timeout_ms": 500,
    "health_check_initial_delay_ms": 0,
}


def main() -> None:
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={"num_cpus": 2, "include_dashboard": False, "_system_config": HEALTH},
    )
    try:
        print(f"ADDRESS {cluster.address}", flush=True)
        for _ in sys.stdin:  # serve until the test closes our stdin
            pass
    finally:
        cluster.shutdown()


if __name__ == "__main__":
    main()
