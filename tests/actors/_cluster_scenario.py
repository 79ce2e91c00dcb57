"""A 3-node simulated cluster loses the node that hosts a busy worker (run as a subprocess).

Prints one JSON line: the first batch's code (WORKER_LOST expected), the second batch's
outcome after the pool replaced its dead workers, and node facts.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import cloudpickle
import ray
from ray.cluster_utils import Cluster

from toolray import AbortController, ToolBatchInput, ToolCall, ToolOutput, define_tool, text_block
from toolray_actors import PoolConfig, RayInitConfig, RayRuntime, RuntimeConfig

HEALTH = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 2,
    "health_check_timeout_ms": 500,
    "health_check_initial_delay_ms": 0,
}


def where_tool(directory: str) -> Any:
    def body(args: Any, ctx: Any) -> str:
        # in a call process (isolation "call") the worker names its node; a Ray driver
        # connection from there would report the node it attached to instead
        node = os.environ.get("TOOLRAY_NODE_ID") or ray.get_runtime_context().get_node_id()
        if args.get("hold"):
            Path(directory, "running").write_text(node)
            ctx.signal.wait_sync(120)
        return node

    return define_tool(
        name="where",
        description="Report the node; optionally hold",
        parameters={"hold": {"type": "boolean"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


async def scenario(cluster: Cluster, nodes: list[Any], rt: RayRuntime, directory: str) -> dict:
    rt.registry.register(where_tool(directory))
    ex = rt.executor("cluster-agent")
    warm = await ex.execute_batch(
        ToolBatchInput(
            [ToolCall("w", "where", "{}")], AbortController().signal, scope="cluster-agent"
        )
    )
    assert not warm.results[0].result.is_error, warm
    task = asyncio.ensure_future(
        ex.execute_batch(
            ToolBatchInput(
                [ToolCall("c1", "where", '{"hold": true}')],
                AbortController().signal,
                scope="cluster-agent",
            )
        )
    )
    marker = Path(directory, "running")
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text():
        if time.monotonic() > deadline:
            raise TimeoutError("the held call never started")
        await asyncio.sleep(0.02)
    doomed = marker.read_text()
    victim = next(n for n in nodes if n.node_id == doomed)
    cluster.remove_node(victim, allow_graceful=False)
    first = await asyncio.wait_for(task, timeout=90)
    after = await ex.execute_batch(
        ToolBatchInput(
            [ToolCall("c2", "where", "{}")], AbortController().signal, scope="cluster-agent"
        )
    )
    second = after.results[0].result
    return {
        "first_code": first.results[0].result.error.info.code,
        "first_message": first.results[0].result.error.message,
        "second_error": second.is_error,
        "second_node": None if second.is_error else second.value,
        "doomed_node": doomed,
        "stats": str(rt.stats()),
    }


def main() -> None:
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "_system_config": HEALTH},
    )
    nodes = [cluster.add_node(num_cpus=1, resources={"toolslot": 8}) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    config = RuntimeConfig(
        namespace="toolray-cluster-test",
        kill_grace_ms=300,
        ray=RayInitConfig(),
        pool=PoolConfig(size=2, spare=1, max_concurrency=8, resources={"toolslot": 1}),
    )
    directory = tempfile.mkdtemp()
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    rt = RayRuntime.start(config)
    try:
        out = asyncio.run(scenario(cluster, nodes, rt, directory))
    finally:
        rt.shutdown()
        ray.shutdown()
        cluster.shutdown()
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
