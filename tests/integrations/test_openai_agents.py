"""The OpenAI Agents SDK runs its function tools through toolray: ``Runner`` with the SDK's
own offline model (``agents.testing.ScriptedModel``)."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, FunctionTool, RunConfig, Runner
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from tests.integrations._tools import add, explode, image_tool, secret, stamp_tool
from toolray import ToolRegistry
from toolray.integrations.openai_agents import function_tools

NO_TRACING = RunConfig(tracing_disabled=True)


class Outputs:
    """A scripted step that answers with the tool outputs it was sent (and records them)."""

    def __init__(self) -> None:
        self.seen: list[list[tuple[str, Any]]] = []

    def __call__(self, call: ModelCall) -> Any:
        outputs = [
            (item["call_id"], item["output"])
            for item in call.input
            if isinstance(item, dict) and item.get("type") == "function_call_output"
        ]
        self.seen.append(outputs)
        return [assistant_message(f"{len(outputs)} results")]


async def _run(tools: list[FunctionTool], *turns: list[tuple[str, str, Any]]) -> Outputs:
    outputs = Outputs()
    steps: list[Any] = [
        [function_call(name, args, call_id=call_id) for call_id, name, args in turn]
        for turn in turns
    ]
    model = ScriptedModel([*steps, ModelStep.respond(outputs)])
    agent = Agent(name="tester", model=model, tools=tools)
    result = await Runner.run(agent, "go", run_config=NO_TRACING)
    assert result.final_output.endswith("results")
    model.assert_complete()
    return outputs


def test_the_scope_view_as_function_tools_strict_where_the_schema_allows() -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(secret)
    registry.register(stamp_tool("stamp"))
    registry.scope("agent").restrict(deny=["secret"])
    tools = function_tools(registry, "agent")
    assert [(t.name, t.strict_json_schema) for t in tools] == [("add", True), ("stamp", True)]
    assert tools[0].description == "Add two integers."
    assert tools[0].params_json_schema["additionalProperties"] is False
    assert [t.name for t in function_tools(registry)] == ["add", "secret", "stamp"]
    registry.register(_optional_tool())
    (optional,) = [t for t in function_tools(registry) if t.name == "optional"]
    assert not optional.strict_json_schema
    assert optional.params_json_schema == registry.schemas()[-1]["parameters"]


def _optional_tool() -> Any:
    from toolray import tool

    @tool
    def optional(x: int = 1) -> int:
        """An optional parameter keeps the schema non-strict."""
        return x

    return optional


async def test_invocations_run_through_the_scope_pipeline() -> None:
    registry = ToolRegistry()
    registry.register(add)
    seen: list[tuple[str, str | None]] = []
    registry.on_result(lambda execution, result: seen.append((execution.call_id, execution.scope)))
    outputs = await _run(
        function_tools(registry, "agent"),
        [("c1", "add", {"a": 1, "b": 2}), ("c2", "add", {"a": 20, "b": 22})],
    )
    assert seen == [("c1", "agent"), ("c2", "agent")]
    assert outputs.seen == [[("c1", "3"), ("c2", "42")]]


async def test_failures_are_text_and_the_run_goes_on() -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(explode)
    registry.guard(lambda e: "not on Sundays" if e.call_id == "g" else None)
    turns = [[(f"x{n}", "explode", {"reason": f"boom {n}"})] for n in range(3)]
    last = [("bad", "add", '{"a": 1,'), ("g", "add", {"a": 1, "b": 1}), ("t", "add", {"a": "x"})]
    outputs = await _run(function_tools(registry), *turns, last)
    (final,) = outputs.seen
    assert final[:3] == [("x0", "Error: boom 0"), ("x1", "Error: boom 1"), ("x2", "Error: boom 2")]
    assert final[3][1].startswith("Error: invalid arguments")
    assert final[4] == ("g", "Error: not on Sundays")
    assert final[5][1].startswith("Error: invalid arguments")


async def test_a_restricted_tool_is_refused_by_toolray_even_from_an_older_list() -> None:
    registry = ToolRegistry()
    registry.register(secret)
    tools = function_tools(registry, "agent")  # before the restriction
    registry.scope("agent").restrict(allow=[])
    assert function_tools(registry, "agent") == []
    outputs = await _run(tools, [("s", "secret", {"key": "k"})])
    ((call_id, text),) = outputs.seen[0]
    assert call_id == "s"
    assert text.startswith("Error: ")
    assert "secret k" not in text


def _spans(registry: ToolRegistry) -> dict[str, tuple[float, float]]:
    spans: dict[str, tuple[float, float]] = {}

    def observe(execution: Any, result: Any) -> None:
        spans[execution.arguments["key"]] = (result.value["start"], result.value["end"])

    registry.on_result(observe)
    return spans


async def test_the_sdk_s_concurrent_calls_keep_toolrays_order() -> None:
    registry = ToolRegistry()
    registry.register(stamp_tool("safe"))
    registry.register(stamp_tool("unsafe", safe=False))
    spans = _spans(registry)
    await _run(
        function_tools(registry),
        [
            ("a", "safe", {"key": "a", "ms": 300}),
            ("b", "safe", {"key": "b", "ms": 300}),
            ("c", "unsafe", {"key": "c", "ms": 50}),
            ("d", "unsafe", {"key": "d", "ms": 50}),
            ("e", "safe", {"key": "e", "ms": 50}),
        ],
    )
    assert max(spans["a"][0], spans["b"][0]) < min(spans["a"][1], spans["b"][1])
    assert max(spans["a"][1], spans["b"][1]) <= spans["c"][0]
    assert spans["c"][1] <= spans["d"][0]
    assert spans["d"][1] <= spans["e"][0]


async def test_images_follow_the_text() -> None:
    registry = ToolRegistry()
    registry.register(image_tool())
    outputs = await _run(function_tools(registry), [("p", "snapshot", {})])
    ((_, output),) = outputs.seen[0]
    kinds = [part["type"] for part in output]
    assert kinds == ["input_text", "input_image"]
    assert output[0]["text"] == "one pixel"
    assert output[1]["image_url"].startswith("data:image/png;base64,iVBOR")


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="function_tools: source must be"):
        function_tools(None)
    with pytest.raises(TypeError, match="function_tools: scope must be a str or None"):
        function_tools(ToolRegistry(), b"agent")  # type: ignore[arg-type]
