"""On Ray: each framework's calls run on the scope's executor actor and worker pools.

A hung tool is killed at its deadline and the run goes on, a scope restriction hides a
tool, LangGraph's calls of one message overlap on the workers, and every example of
``examples/integrations`` runs against the session runtime.
"""

from __future__ import annotations

import asyncio
from typing import Any

import cloudpickle
import pytest
from agents import Agent, Runner

from tests.integrations._tools import add, secret, stamp_tool
from tests.integrations.test_examples import ANSWER, NAMES, load_example
from tests.integrations.test_langgraph import _calls, _graph, _tool_messages
from tests.integrations.test_openai_agents import NO_TRACING, Outputs
from tests.integrations.test_pydantic_ai import Script, _run
from tests.tools import stubborn_tool
from toolray import TimeoutPolicy
from toolray.integrations.langgraph import ToolrayToolNode
from toolray.integrations.openai_agents import function_tools

pytestmark = pytest.mark.ray

SCOPE = "integrations"
"""One scope for every test here: its executor actor starts once (everything else is owned)."""
TIMED_OUT = "Error: tool call timed out after 300ms"


@pytest.fixture
def ray_rt(by_value: Any) -> Any:
    """The session runtime with ``add``, ``secret`` (denied to the scope) and a hung tool."""
    rt = by_value
    rt.owned.append(TimeoutPolicy().install(rt.scope(SCOPE)))
    for definition in (add, secret, stubborn_tool("hung", "block", timeout_ms=300)):
        rt.owned.append(rt.registry.register(definition))
    rt.owned.append(rt.scope(SCOPE).restrict(deny=["secret"]))
    return rt


async def _killed(rt: Any, kills_before: int) -> None:
    """Wait (bounded) until the runtime counts a worker killed after ``kills_before``."""
    for _ in range(200):
        if rt.stats().kills > kills_before:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no worker was killed: {rt.stats()}")


async def test_pydantic_ai_a_hung_tool_is_killed_and_the_run_goes_on(ray_rt: Any) -> None:
    kills = ray_rt.stats().kills
    script = Script([("hung", {"seconds": 60})], [("add", {"a": 1, "b": 2})])
    assert await _run(ray_rt, script, SCOPE) == "done"
    assert script.seen_tools[0] == [("add", False), ("hung", False)]
    assert script.returned(0) == [("s1c0", TIMED_OUT)]
    assert script.returned(1) == [("s2c0", "3")]
    await _killed(ray_rt, kills)


async def test_langgraph_one_message_overlaps_on_the_workers_then_survives_a_hang(
    ray_rt: Any,
) -> None:
    ray_rt.owned.append(ray_rt.registry.register(stamp_tool("stamp")))
    kills = ray_rt.stats().kills
    node = ToolrayToolNode(ray_rt, SCOPE)
    assert [t["function"]["name"] for t in node.tool_schemas()] == ["add", "hung", "stamp"]
    together = _calls(
        ("a", "stamp", {"key": "a", "ms": 300}), ("b", "stamp", {"key": "b", "ms": 300})
    )
    hang = _calls(("h", "hung", {"seconds": 60}))
    after = _calls(("s", "add", {"a": 2, "b": 3}))
    state = await _graph(node, together, hang, after).ainvoke({"messages": []})
    messages = _tool_messages(state)
    assert [(m.tool_call_id, m.status) for m in messages] == [
        ("a", "success"),
        ("b", "success"),
        ("h", "error"),
        ("s", "success"),
    ]
    a, b = (m.artifact for m in messages[:2])
    assert max(a["start"], b["start"]) < min(a["end"], b["end"])  # worker clocks: one machine
    assert messages[2].content == TIMED_OUT
    assert messages[3].content == "5"
    assert state["messages"][-1].content == "done"
    await _killed(ray_rt, kills)


async def test_openai_agents_a_hung_tool_is_killed_and_the_run_goes_on(ray_rt: Any) -> None:
    from agents.testing import ModelStep, ScriptedModel, function_call

    kills = ray_rt.stats().kills
    tools = function_tools(ray_rt, SCOPE)
    assert [t.name for t in tools] == ["add", "hung"]
    outputs = Outputs()
    model = ScriptedModel(
        [
            [function_call("hung", {"seconds": 60}, call_id="h")],
            [function_call("add", {"a": 4, "b": 4}, call_id="s")],
            ModelStep.respond(outputs),
        ]
    )
    result = await Runner.run(
        Agent(name="t", model=model, tools=tools), "go", run_config=NO_TRACING
    )
    assert result.final_output == "2 results"
    assert outputs.seen == [[("h", TIMED_OUT), ("s", "8")]]
    await _killed(ray_rt, kills)


@pytest.mark.parametrize("name", NAMES)
def test_each_example_runs_on_ray(name: str, rt: Any, capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example(name, "ray")
    cloudpickle.register_pickle_by_value(example)  # as a script's tools (``__main__``) travel
    assert example.run(rt, SCOPE) == ANSWER
    assert capsys.readouterr().out.startswith("tools offered: ['get_weather']")
