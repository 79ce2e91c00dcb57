"""A script whose batch calls carry argument objects of classes defined in ``__main__``.

Run as ``python -m tests.actors._main_classes`` (so its classes live in ``__main__``, as a
script's or a notebook's do): the same batch runs in process and through a local Ray it
starts itself; one ``RESULT {json}`` line gives both, as ``[is_error, message]`` per call.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import ray

from toolray import AbortController, BatchExecutor, ToolBatchInput, ToolCall, ToolRegistry
from toolray_actors import RayRuntime, RuntimeConfig
from toolray_actors.bench._rawray import bench_tool


class Boom(Mapping[str, Any]):
    """Parsed arguments whose reading raises (the call's failure says so)."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom iter")

    def __len__(self) -> int:
        return 1


class Args(dict[str, Any]):
    """A dict subclass of the script: the core takes it; on Ray it must cross by value."""


def _calls() -> list[ToolCall]:
    return [
        ToolCall("c0", "bench_noop", Boom()),
        ToolCall("c1", "bench_noop", Args(ms=1)),
        ToolCall("c2", "bench_noop", {"lock": threading.Lock()}),
        ToolCall("c3", "bench_noop", "{}"),
    ]


def _plain(result: Any) -> list[list[Any]]:
    return [
        [r.result.is_error, r.result.error.message if r.result.is_error else None]
        for r in result.results
    ]


async def _both() -> dict[str, Any]:
    registry = ToolRegistry()
    registry.register(bench_tool("noop"))
    core = await BatchExecutor(registry).execute(ToolBatchInput(_calls(), AbortController().signal))
    rt = RayRuntime.start(RuntimeConfig.model_validate({"namespace": "main-classes"}))
    try:
        rt.registry.register(bench_tool("noop"))
        batch = ToolBatchInput(_calls(), AbortController().signal, scope="s")
        on_ray = await rt.executor("s").execute_batch(batch)
    finally:
        rt.teardown()
    return {"core": _plain(core), "ray": _plain(on_ray)}


if __name__ == "__main__":
    ray.init(address="local", include_dashboard=False, log_to_driver=False)
    try:
        print("RESULT " + json.dumps(asyncio.run(_both())), flush=True)
    finally:
        ray.shutdown()
