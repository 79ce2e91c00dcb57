"""Child process for the JsonlEventLog durability test: ``python _eventlog_child.py LOG``.

Runs the batch ``r1 r2 r3 w4 r5`` (cap 2) into a ``JsonlEventLog`` at ``LOG``. The exclusive
``w4`` starts only after ``r1..r3`` have committed; its body writes ``midway`` to stdout (the
parent's pipe) and then blocks forever, so the parent can SIGKILL the process mid-batch.
"""

from __future__ import annotations

import asyncio
import json
import sys

from toolray import (
    AbortController,
    JsonlEventLog,
    LogStep,
    ToolBatchInput,
    ToolCall,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)


async def body(args: dict[str, str], ctx: object) -> str:
    key = args["key"]
    if key == "w4":
        sys.stdout.write("midway\n")
        sys.stdout.flush()
        await asyncio.Event().wait()  # never set: the parent kills us here
    return key


async def main(path: str) -> None:
    registry = ToolRegistry()
    registry.register(
        define_tool(
            name="rec",
            description="durability probe",
            parameters={"key": {"type": "string", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=body,
            is_concurrency_safe=lambda args: not args["key"].startswith("w"),
        )
    )
    keys = ["r1", "r2", "r3", "w4", "r5"]
    calls = [ToolCall(f"c{k}", "rec", json.dumps({"key": k})) for k in keys]
    log = JsonlEventLog(path)
    batch = ToolBatchInput(
        calls,
        AbortController().signal,
        max_parallel_tool_calls=2,
        scope="agent",
        log=LogStep(1, 1, log),
    )
    await registry.execute_batch(batch)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
