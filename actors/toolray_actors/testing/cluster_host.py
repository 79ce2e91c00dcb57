"""A Ray cluster owned by this process (``ray.cluster_utils.Cluster``), for multi-driver tests.

Prints ``ADDRESS <gcs address>`` once the head is up, then serves commands from stdin until
it closes (the test's end), and shuts the cluster down:

- ``add <resources as JSON>`` starts a worker node, answers ``NODE <node id>``;
- ``remove <node id>`` removes that node (not gracefully: a lost machine), answers ``REMOVED``.

Usage: ``python -m toolray_actors.testing.cluster_host``.
"""

from __future__ import annotations

import json
import sys

from ray.cluster_utils import Cluster

HEALTH = {
    "health_check_period_ms": 1000,
    "health_check_failure_threshold": 3,
    "health_check_timeout_ms": 1000,
    "health_check_initial_delay_ms": 0,
}


def main() -> None:
    """Start the cluster, serve node commands until stdin closes, shut the cluster down."""
    cluster = Cluster(
        initialize_head=True,
        connect=False,
        head_node_args={"num_cpus": 2, "include_dashboard": False, "_system_config": HEALTH},
    )
    try:
        print(f"ADDRESS {cluster.address}", flush=True)
        nodes = {}
        for line in sys.stdin:  # serve until the test closes our stdin
            command, _, rest = line.strip().partition(" ")
            if command == "add":
                node = cluster.add_node(num_cpus=1, resources=json.loads(rest))
                cluster.wait_for_nodes()
                nodes[node.node_id] = node
                print(f"NODE {node.node_id}", flush=True)
            elif command == "remove":
                cluster.remove_node(nodes.pop(rest.strip()), allow_graceful=False)
                print("REMOVED", flush=True)
    finally:
        cluster.shutdown()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
