"""toolray's actors pace the collector and trim their heap; a driver and a call process do not."""

from __future__ import annotations

import gc
from typing import Any

import pytest

from toolray import ToolBatchInput, ToolCall, ToolOutput, define_tool, text_block
from toolray_actors._collector import THRESHOLDS, pace_collector


def _collector_tool(name: str) -> Any:
    def body(args: Any, ctx: Any) -> Any:
        import gc
        import threading

        trims = [t.name for t in threading.enumerate() if t.name == "toolray-heap-trim"]
        return {
            "threshold": list(gc.get_threshold()),
            "frozen": gc.get_freeze_count(),
            "trims": len(trims),
        }

    return define_tool(
        name=name,
        description="Report the collector's pace",
        parameters={},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))]),
        execute=body,
    )


def test_outside_an_actor_the_pace_is_left_alone() -> None:
    before = gc.get_threshold()
    assert pace_collector() is False
    assert gc.get_threshold() == before


@pytest.mark.ray
@pytest.mark.parametrize("isolation", ["shared", "call"])
async def test_a_worker_paces_its_collector_and_a_call_process_keeps_pythons(
    isolation: str, rt: Any, shared_rt: Any, scope_key: str
) -> None:
    runtime = shared_rt if isolation == "shared" else rt
    name = f"collector_pace_{isolation}"
    runtime.owned.append(runtime.registry.register(_collector_tool(name)))
    batch = ToolBatchInput([ToolCall("c", name, {})], scope=scope_key)
    out = await runtime.executor(scope_key).execute_batch(batch)
    value = out.results[0].result.value
    if isolation == "shared":  # the body ran in the worker actor itself
        assert tuple(value["threshold"]) == THRESHOLDS
        assert value["frozen"] > 0
        assert value["trims"] == 1  # the actor gives its freed heap back
    else:  # in a call process forked from a template: a fresh interpreter's pace
        assert tuple(value["threshold"]) == gc.get_threshold() != THRESHOLDS
        assert value["trims"] == 0
