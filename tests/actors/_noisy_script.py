"""A driver that meets every fault the runtime recovers from, then shuts down (twice).

Run by ``test_quiet.py`` in a fresh process with its own local Ray; everything it prints
is checked for noise. Usage: ``python -m tests.actors._noisy_script``.
"""

from __future__ import annotations

import os
import signal
import time

import cloudpickle

from tests import tools
from toolray import AbortController, ToolBatchInput, ToolCall
from toolray.policies import TimeoutPolicy
from toolray_actors import RayRuntime


def main() -> None:
    cloudpickle.register_pickle_by_value(tools)
    rt = RayRuntime.start("ci", address="local")
    rt.registry.register(tools.stubborn_tool("stub", "block", timeout_ms=200))
    rt.registry.register(tools.crash_tool("crash"))
    rt.registry.register(tools.text_echo_tool("echo"))
    TimeoutPolicy().install(rt.registry)
    ex = rt.executor("noisy")
    calls = [ToolCall("c1", "stub", '{"seconds": 5}'), ToolCall("c2", "crash", "{}")]
    out = ex.execute_batch_sync(ToolBatchInput(calls, AbortController().signal, scope="noisy"))
    print("CODES", [r.result.error.info.code for r in out.results], flush=True)
    executor = next(a for a in rt.stats().actors if a.name == ex.name)
    os.kill(executor.pid, signal.SIGKILL)
    again = ex.execute_batch_sync(
        ToolBatchInput([ToolCall("e1", "echo", "{}")], AbortController().signal, scope="noisy")
    )
    print("AGAIN", again.results[0].result.is_error, flush=True)
    time.sleep(3)  # an observation window: Ray reports worker deaths about 1 s later
    rt.shutdown()
    rt.shutdown()
    print("DONE", flush=True)


if __name__ == "__main__":
    main()
