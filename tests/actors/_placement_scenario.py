"""Placement on a 2-node simulated cluster (run as a subprocess by ``test_placement.py``).

The head (control actors, default pools) and node ``special``, the only one offering the
custom resource ``special``. One batch runs, in parallel:

- a tool placed on ``resources={"special": 1}`` (it must run on the ``special`` node);
- a tool placed on a resource no node has, with a 1.5 s budget (it must time out with
  ``TOOL_TIMEOUT`` at its deadline while its pool's workers cannot be scheduled; it runs
  alone first, so its own duration is measured);
- tools whose placements differ only in ``runtime_env`` (each sees its own env var), one
  naming a ``[pools.<name>]`` table (whose resources put it on the ``special`` node), and
  an unplaced one (the default pool).

Then ``rt.stats()`` must list every pool, and ``shutdown()`` (the last lease) must stop
every actor of the namespace. Prints one ``RESULT <json>`` line.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import cloudpickle
import ray
from ray.cluster_utils import Cluster

from tests import tools
from toolray import AbortController, Placement, TimeoutPolicy, ToolBatchInput, ToolCall
from toolray_actors import PoolConfig, RayInitConfig, RayRuntime, RuntimeConfig

NAMESPACE = "toolray-placement-test"
BUDGET_MS = 1500


def _env(mark: str) -> dict[str, Any]:
    return {"env_vars": {"POOL_MARK": mark}}


def _definitions() -> list[Any]:
    budgeted = tools.env_tool("nowhere", "POOL_MARK", Placement(resources={"absent": 1}))
    return [
        tools.env_tool("special", "POOL_MARK", Placement(resources={"special": 1})),
        type(budgeted)(**{**_fields(budgeted), "timeout_ms": BUDGET_MS}),
        tools.env_tool("env_a", "POOL_MARK", Placement(runtime_env=_env("a"), size=1, spare=0)),
        tools.env_tool("env_b", "POOL_MARK", Placement(runtime_env=_env("b"), size=1, spare=0)),
        tools.env_tool("named", "POOL_MARK", Placement(pool="tabled")),  # on "special"
        tools.env_tool("plain", "POOL_MARK"),
    ]


def _fields(definition: Any) -> dict[str, Any]:
    return {f: getattr(definition, f) for f in definition.__dataclass_fields__}


async def scenario(rt: RayRuntime) -> dict[str, Any]:
    TimeoutPolicy().install(rt.registry)
    for definition in _definitions():
        rt.registry.register(definition)
    executor = rt.executor("placed")
    lone = ToolBatchInput(
        [ToolCall("c-0", "nowhere", "{}")], AbortController().signal, scope="placed"
    )
    started = time.monotonic()
    waited = await executor.execute_batch(lone)
    out: dict[str, Any] = {"nowhere_s": time.monotonic() - started}
    out["nowhere_alone"] = waited.results[0].result.to_wire()["error"]
    names = ["special", "nowhere", "env_a", "env_b", "named", "plain"]
    calls = [ToolCall(f"c-{n}", n, "{}") for n in names]
    batch = ToolBatchInput(
        calls, AbortController().signal, scope="placed", max_parallel_tool_calls=8
    )
    result = await executor.execute_batch(batch)
    for name, r in zip(names, result.results, strict=True):
        res = r.result
        out[name] = (
            {"error": res.to_wire()["error"], "text": res.content[0]["text"]}
            if res.is_error
            else res.value
        )
    stats = rt.stats()
    out["pools"] = sorted({a.name for a in stats.actors if a.kind == "pool"})
    return out


def main() -> None:
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    special = cluster.add_node(num_cpus=1, resources={"special": 2})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    cloudpickle.register_pickle_by_value(tools)
    config = RuntimeConfig(
        namespace=NAMESPACE,
        kill_grace_ms=300,
        ray=RayInitConfig(),
        # the default pool stays on the head node, so "plain" shows where "special" is not
        pool=PoolConfig(
            size=1, spare=0, max_concurrency=8, resources={"node:__internal_head__": 0.01}
        ),
        pools={"tabled": PoolConfig(size=1, spare=0, resources={"special": 0.5})},
    )
    rt = RayRuntime.start(config)
    try:
        out = asyncio.run(scenario(rt))
    finally:
        rt.shutdown()
    out["nodes"] = {"head": cluster.head_node.node_id, "special": special.node_id}
    deadline = time.monotonic() + 30
    left = ["?"]
    while left and time.monotonic() < deadline:
        found = ray.util.list_named_actors(all_namespaces=True)
        left = [a["name"] for a in found if a.get("namespace") == NAMESPACE]
        time.sleep(0.2)
    out["left_after_shutdown"] = left
    ray.shutdown()
    cluster.shutdown()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
