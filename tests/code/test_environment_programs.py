"""Code Mode programs against an environment's instance (a real ``PythonRuntime`` child).

A program's sub-calls go through the pipeline like any call, so they take the instance's
turns: three concurrent increments from one program and a batch's own increments lose no
update, and the program reads the state its calls built.
"""

from __future__ import annotations

import asyncio

import pytest

from tests import envs
from toolray import (
    AbortController,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
)
from toolray.code import PythonRuntime

pytestmark = pytest.mark.asyncio


async def test_a_program_and_a_batch_share_one_instance(runtime: PythonRuntime) -> None:
    reg = ToolRegistry(mode="both", code_runtime=runtime)
    reg.register_environment(envs.counter_env())
    for definition in envs.COUNTER_TOOLS:
        reg.register(definition)
    await reg.environment("counter", scope="agent").open({"start": 10})
    program = """
import asyncio
await asyncio.gather(*(tools.incr(by=1) for _ in range(3)))
await tools.incr_twice(by=5)
await tools.peek()
"""
    code = ToolExecutionInput(
        "call-1",
        "run_code",
        {"code": program, "description": "Test program"},
        AbortController().signal,
        scope="agent",
    )
    batch = ToolBatchInput(
        [ToolCall(f"c{i}", "incr", {"by": 100}) for i in range(3)], scope="agent"
    )
    result, batched = await asyncio.gather(reg.execute(code), reg.execute_batch(batch))
    seen = result.value["result"]  # type: ignore[union-attr]
    assert seen in (23, 123, 223, 323)  # the program's own 13, plus whole batch increments
    values = [r.result.value for r in batched.results]  # type: ignore[union-attr]
    assert len(set(values)) == 3  # no two increments read the same value
    state = await reg.environment("counter", scope="agent").snapshot()
    assert state["n"] == 323
    assert sorted(state["log"]) == [1, 1, 1, 5, 5, 100, 100, 100]
