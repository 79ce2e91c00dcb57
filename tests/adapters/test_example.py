"""``examples/agent_loop.py`` runs end to end in-process, for every provider shape."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from anthropic.types import TextBlockParam, ToolParam
from openai.types.chat import (
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import FunctionToolParam
from openai.types.responses.response_input_item_param import FunctionCallOutput

from tests._scripts import load_script

from ._tools import assert_sdk_accepts

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agent_loop.py"
ANSWER = (
    '{"city": "Paris", "celsius": 21, "sky": "sunny"}; '
    '{"city": "Oslo", "celsius": 12, "sky": "rain"}; '
    "Error: no weather station in Atlantis"
)


@pytest.fixture(scope="module")
def example() -> ModuleType:
    return load_script(EXAMPLE, "agent_loop_example")


def test_main_prints_the_answer(example: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert example.main([]) == ANSWER
    out = capsys.readouterr().out
    assert out.count("-> get_weather(") == 3
    assert out.endswith(f"<- {ANSWER}\n")


def test_chat_requests_are_what_the_sdk_takes(example: ModuleType) -> None:
    answer, model = example.run_agent("weather?", "chat")
    assert answer == ANSWER
    first, second = model.requests
    for tool in second["tools"]:
        assert_sdk_accepts(ChatCompletionFunctionToolParam, tool)
    assert second["tools"][0]["function"]["strict"] is True
    user, assistant, *tool_messages = second["messages"]
    assert_sdk_accepts(ChatCompletionUserMessageParam, user)
    assert_sdk_accepts(ChatCompletionAssistantMessageParam, assistant)
    assert [m["tool_call_id"] for m in tool_messages] == [
        "call_paris",
        "call_oslo",
        "call_atlantis",
    ]
    for message in tool_messages:
        assert_sdk_accepts(ChatCompletionToolMessageParam, message)
    assert first["messages"] == [user]


def test_responses_requests_are_what_the_sdk_takes(example: ModuleType) -> None:
    answer, model = example.run_agent("weather?", "responses")
    assert answer == ANSWER
    request = model.requests[-1]
    for tool in request["tools"]:
        assert_sdk_accepts(FunctionToolParam, tool)
    outputs = [item for item in request["input"] if item.get("type") == "function_call_output"]
    assert [item["call_id"] for item in outputs] == ["call_paris", "call_oslo", "call_atlantis"]
    for item in outputs:
        assert_sdk_accepts(FunctionCallOutput, item)


def test_anthropic_requests_are_what_the_sdk_takes(example: ModuleType) -> None:
    answer, model = example.run_agent("weather?", "anthropic")
    assert answer == ANSWER
    request = model.requests[-1]
    for tool in request["tools"]:
        assert_sdk_accepts(ToolParam, tool)
    results = request["messages"][-1]
    assert results["role"] == "user"
    assert [b["is_error"] for b in results["content"]] == [False, False, True]
    for block in results["content"]:
        for part in block["content"]:
            assert_sdk_accepts(TextBlockParam, part)
