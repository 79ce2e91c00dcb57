"""A user's driver with Ray's defaults (``log_to_driver``): toolray's own kills print nothing.

Run by ``test_quiet.py`` in a fresh process with its own local Ray; everything it prints is
checked. The cancellation ladder kills a worker, the executor is reaped by its idle TTL,
the runtime shuts down (twice): none of that prints a Ray notice or a traceback, while what a
tool prints reaches the driver, and Ray's own printer is left as it is.
Usage: ``python -m tests.actors._noisy_script``.
"""

from __future__ import annotations

import time

import cloudpickle

from tests import tools
from toolray import ToolBatchInput, ToolCall, tool
from toolray.policies import TimeoutPolicy
from toolray_actors import RayRuntime, load_config


@tool(concurrency_safe=True)
def shout(text: str) -> str:
    """Print, then upper-case a text."""
    print("TOOL SAYS", text)
    return text.upper()


def main() -> None:
    from ray._private import worker

    cloudpickle.register_pickle_by_value(tools)
    printer = worker.print_to_stdstream
    cfg = load_config("ci").model_copy(update={"ray": load_config("local").ray})
    cfg = cfg.model_copy(update={"ray": cfg.ray.model_copy(update={"include_dashboard": False})})
    rt = RayRuntime.start(cfg, address="local")
    print("PRINTER UNTOUCHED", worker.print_to_stdstream is printer, flush=True)
    rt.registry.register(tools.stubborn_tool("stub", "block", timeout_ms=200))
    rt.registry.register(shout)
    TimeoutPolicy().install(rt.registry)
    ex = rt.executor(None)
    calls = [ToolCall("c1", "stub", '{"seconds": 5}'), ToolCall("c2", "shout", {"text": "hi"})]
    out = ex.execute_batch_sync(ToolBatchInput(calls))
    print("CODES", [r.result.error.info.code if r.result.is_error else "ok" for r in out.results])
    print("KILLS", rt.stats().kills, flush=True)
    time.sleep(3)  # an observation window: Ray reports a worker death about 1 s later
    rt.shutdown()
    rt.shutdown()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
