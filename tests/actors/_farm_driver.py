"""One driver of the farm-wide rate-limit test: a rate-limited tool, sharded executors.

Usage: ``python -m tests.actors._farm_driver <address> <namespace> <dir> <name> <calls>``.
It starts a runtime (2 executor shards), registers ``search`` (25/s, burst 1; its body
appends its start time to ``<dir>/starts-<name>``), prints ``READY``, waits for a ``go``
line, runs ``<calls>`` calls as 4 agent scopes' batches at once, prints ``DONE {json}``
(the failure codes) and shuts down. Tools are defined here, in ``__main__``, so both
drivers ship byte-identical definitions.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from toolray import AbortController, RateLimit, ToolBatchInput, ToolCall, tool
from toolray_actors import RayRuntime, RuntimeConfig

LIMIT = RateLimit(25, burst=1)


def make_search(folder: str) -> Any:
    @tool(name="search", concurrency_safe=True, rate_limit=LIMIT)
    def search(query: str, driver: str) -> str:
        """Search the web (records when each call started)."""
        with open(Path(folder) / f"starts-{driver}", "a", encoding="utf-8") as out:
            out.write(f"{time.time():.6f}\n")
        return f"results for {query}"

    return search


async def run(rt: RayRuntime, name: str, calls: int) -> list[Any]:
    per_scope = calls // 4

    async def agent(k: int) -> Any:
        batch = [
            ToolCall(f"{name}-{k}-{i}", "search", {"query": str(i), "driver": name})
            for i in range(per_scope)
        ]
        ex = rt.executor(f"{name}-agent-{k}")
        signal = AbortController().signal
        return await ex.execute_batch(
            ToolBatchInput(batch, signal, max_parallel_tool_calls=per_scope)
        )

    results = await asyncio.gather(*(agent(k) for k in range(4)))
    codes = []
    for result in results:
        for r in result.results:
            info = getattr(getattr(r.result, "error", None), "info", None)
            codes.append(info.code if info is not None else None)
    return codes


def main() -> None:
    address, namespace, folder, name, calls = sys.argv[1:6]
    config = RuntimeConfig.model_validate(
        {
            "namespace": namespace,
            "executors": {"mode": "sharded", "shards": 2},
            "pool": {"size": 2, "spare": 0},
        }
    )
    rt = RayRuntime.start(config, address=address)
    rt.registry.register(make_search(folder))
    print("READY", flush=True)
    sys.stdin.readline()
    codes = asyncio.run(run(rt, name, int(calls)))
    print("DONE " + json.dumps({"codes": codes}), flush=True)
    sys.stdin.readline()  # stay attached until told: the other driver may still run
    rt.shutdown()


if __name__ == "__main__":
    main()
