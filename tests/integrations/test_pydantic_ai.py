"""Pydantic AI runs its tool calls through toolray, tested with its own offline models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from pydantic_ai import Agent, BinaryContent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from tests.integrations._tools import add, explode, image_tool, secret, stamp_tool
from toolray import ToolRegistry
from toolray.code import PythonRuntime
from toolray.integrations.pydantic_ai import ToolrayToolset

Turn = list[tuple[str, Any]]


class Script:
    """A ``FunctionModel`` function: one scripted turn of tool calls per request, then text.

    It records what each request showed the model (tools, instructions, the tool results).
    """

    def __init__(self, *turns: Turn) -> None:
        self.turns = list(turns)
        self.seen_tools: list[list[tuple[str, bool]]] = []
        self.instructions: list[str | None] = []
        self.results: list[list[Any]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen_tools.append([(t.name, t.sequential) for t in info.function_tools])
        self.instructions.append(info.instructions)
        last = messages[-1]
        if isinstance(last, ModelRequest) and len(messages) > 1:
            self.results.append(list(last.parts))
        if not self.turns:
            return ModelResponse(parts=[TextPart("done")])
        turn = self.turns.pop(0)
        step = len(self.seen_tools)
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f"s{step}c{i}")
                for i, (name, args) in enumerate(turn)
            ]
        )

    def returned(self, step: int = 0) -> list[tuple[str, Any]]:
        """``(tool_call_id, content)`` of the tool results the model got after ``step``."""
        return [
            (part.tool_call_id, part.content)
            for part in self.results[step]
            if isinstance(part, ToolReturnPart | RetryPromptPart)
        ]


def _registry(*tools: Any) -> ToolRegistry:
    registry = ToolRegistry()
    for definition in tools:
        registry.register(definition)
    return registry


async def _run(registry: Any, script: Script, scope: str | None = None) -> str:
    agent = Agent(FunctionModel(script), toolsets=[ToolrayToolset(registry, scope)])
    result = await agent.run("go")
    return str(result.output)


async def test_the_model_sees_the_scope_view_with_sequential_marks() -> None:
    registry = _registry(add, explode, secret, stamp_tool("stamp", safe=False))
    registry.scope("agent").restrict(deny=["secret"])
    script = Script()
    assert await _run(registry, script, "agent") == "done"
    assert script.seen_tools == [[("add", False), ("explode", True), ("stamp", True)]]
    tools = await ToolrayToolset(registry, "agent").get_tools(None)  # type: ignore[arg-type]
    assert tools["add"].tool_def.parameters_json_schema == registry.schemas()[0]["parameters"]
    assert tools["add"].tool_def.description == "Add two integers."


async def test_calls_run_through_the_scope_pipeline() -> None:
    registry = _registry(add)
    seen: list[tuple[str, str | None]] = []

    def observer(execution: Any, result: Any) -> None:
        seen.append((execution.call_id, execution.scope))

    registry.on_result(observer)
    script = Script([("add", {"a": 1, "b": 2}), ("add", '{"a": 40, "b": 2}')])
    assert await _run(registry, script, "agent") == "done"
    assert seen == [("s1c0", "agent"), ("s1c1", "agent")]
    assert script.returned() == [("s1c0", "3"), ("s1c1", "42")]


def _even_sums_only(execution: Any) -> str | None:
    arguments = execution.arguments
    odd = isinstance(arguments, Mapping) and arguments.get("a", 0) % 2
    return "no odd sums" if execution.name == "add" and odd else None


async def test_failures_are_returned_as_results_and_the_run_goes_on() -> None:
    registry = _registry(add, explode)
    registry.scope("agent").guard(_even_sums_only)
    turns = [[("explode", {"reason": f"boom {n}"})] for n in range(4)]  # past max_retries
    script = Script(*turns, [("add", '{"a": 1,'), ("add", {"a": 1, "b": 1}), ("add", "[1]")])
    assert await _run(registry, script, "agent") == "done"
    assert [script.returned(n) for n in range(4)] == [
        [(f"s{n + 1}c0", f"Error: boom {n}")] for n in range(4)
    ]
    invalid, denied, not_an_object = script.returned(4)
    assert invalid[1].startswith("Error: invalid arguments")
    assert denied == ("s5c1", "Error: no odd sums")
    assert not_an_object[1].startswith("Error: invalid arguments")
    assert all(isinstance(p, ToolReturnPart) for step in script.results for p in step)


async def test_a_restricted_tool_never_runs() -> None:
    registry = _registry(add, secret)
    registry.scope("agent").restrict(allow=["add"])
    script = Script([("secret", {"key": "k"})])
    assert await _run(registry, script, "agent") == "done"
    ((_, content),) = script.returned()
    assert "secret" not in [name for name, _ in script.seen_tools[0]]
    assert "Unknown tool name: 'secret'" in content  # Pydantic AI's answer: not presented


async def test_safe_calls_overlap_and_sequential_ones_run_alone() -> None:
    registry = _registry(stamp_tool("safe"), stamp_tool("unsafe", safe=False))
    starts: dict[str, tuple[float, float]] = {}

    def observer(execution: Any, result: Any) -> None:
        starts[execution.arguments["key"]] = (result.value["start"], result.value["end"])

    registry.on_result(observer)
    script = Script(
        [("safe", {"key": "a", "ms": 300}), ("safe", {"key": "b", "ms": 300})],
        [("unsafe", {"key": "c", "ms": 50}), ("unsafe", {"key": "d", "ms": 50})],
    )
    assert await _run(registry, script) == "done"
    assert max(starts["a"][0], starts["b"][0]) < min(starts["a"][1], starts["b"][1])
    assert starts["c"][1] <= starts["d"][0]


async def test_a_call_classified_exclusive_when_it_runs_waits_for_its_turn() -> None:
    """Static mark: concurrent (its classifier says True for no arguments); this call: not."""
    registry = ToolRegistry()
    spans: dict[str, tuple[float, float]] = {}
    registry.register(_io_tool())

    def observer(execution: Any, result: Any) -> None:
        spans[execution.arguments["key"]] = (result.value["start"], result.value["end"])

    registry.on_result(observer)
    script = Script(
        [
            ("io", {"key": "r1", "ms": 100}),
            ("io", {"key": "w1", "ms": 100}),
            ("io", {"key": "r2", "ms": 100}),
        ]
    )
    assert await _run(registry, script) == "done"
    assert script.seen_tools[0] == [("io", False)]
    assert spans["r1"][1] <= spans["w1"][0]
    assert spans["w1"][1] <= spans["r2"][0]


def _io_tool() -> Any:
    """A stamp tool whose calls are safe for keys starting with ``r`` (reads) only."""
    return stamp_tool("io", safe=lambda args: str(args.get("key", "r")).startswith("r"))


async def test_test_model_calls_every_presented_tool() -> None:
    registry = _registry(add, explode, secret)
    registry.scope("agent").restrict(allow=["add", "explode"])
    agent = Agent(TestModel(), toolsets=[ToolrayToolset(registry, "agent")])
    result = await agent.run("go")
    assert result.output == '{"add":"0","explode":"Error: a"}'


async def test_a_code_mode_scope_presents_run_code_and_its_prompt_sections() -> None:
    runtime = PythonRuntime(warm=0)
    try:
        registry = ToolRegistry(code_runtime=runtime)
        registry.register(add)
        registry.scope("coder").present_as("code")
        program = "await add(a=1, b=2) + await add(a=3, b=4)"
        script = Script([("run_code", {"code": program, "description": "Two sums"})])
        assert await _run(registry, script, "coder") == "done"
    finally:
        runtime.close()
    assert [name for name, _ in script.seen_tools[0]] == ["run_code"]
    assert "async def add(a: int, b: int) -> int" in (script.instructions[0] or "")
    ((_, content),) = script.returned()
    assert "10" in content


async def test_images_reach_the_model_as_binary_content() -> None:
    registry = _registry(image_tool())
    script = Script([("snapshot", {})])
    assert await _run(registry, script) == "done"
    contents = [getattr(p, "content", None) for p in script.results[0]]
    flat = [c for item in contents for c in (item if isinstance(item, list) else [item])]
    images = [c for c in flat if isinstance(c, BinaryContent)]
    assert [image.media_type for image in images] == ["image/png"]
    assert images[0].data.startswith(b"\x89PNG")
    assert "one pixel" in flat


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="ToolrayToolset: source must be"):
        ToolrayToolset(object())
    with pytest.raises(TypeError, match="ToolrayToolset: scope must be a str or None"):
        ToolrayToolset(ToolRegistry(), 3)  # type: ignore[arg-type]
