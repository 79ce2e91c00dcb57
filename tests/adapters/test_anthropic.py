"""``toolray.adapters.anthropic`` against the Anthropic SDK's own types (no network)."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from anthropic.types import (
    ImageBlockParam,
    Message,
    TextBlockParam,
    ToolParam,
    ToolResultBlockParam,
    ToolUseBlock,
)

from toolray import ToolCall
from toolray.adapters.anthropic import (
    calls_from_anthropic,
    results_to_anthropic,
    tools_for_anthropic,
)

from ._tools import PIXEL, assert_sdk_accepts, make_registry, run_calls

CONTENT = [
    {"type": "thinking", "thinking": "Let me add.", "signature": "sig"},
    {"type": "text", "text": "Adding and charting.", "citations": None},
    {"type": "tool_use", "id": "toolu_a", "name": "add", "input": {"a": 1, "b": 2}},
    {"type": "tool_use", "id": "toolu_f", "name": "fail", "input": {"why": "x"}},
    {"type": "tool_use", "id": "toolu_c", "name": "chart", "input": {"of": "q3"}},
    {"type": "tool_use", "id": "toolu_n", "name": "note", "input": {"what": "milk"}},
]
EXPECTED = [
    ToolCall("toolu_a", "add", '{"a": 1, "b": 2}'),
    ToolCall("toolu_f", "fail", '{"why": "x"}'),
    ToolCall("toolu_c", "chart", '{"of": "q3"}'),
    ToolCall("toolu_n", "note", '{"what": "milk"}'),
]


def _message(content: list[dict[str, Any]]) -> Message:
    return Message.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": content,
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )


def _assert_tool_result_block(block: dict[str, Any]) -> None:
    """The SDK's ``ToolResultBlockParam``, field by field (its nested document types are
    recursive, which pydantic cannot validate lazily as a whole)."""
    hints = typing.get_type_hints(ToolResultBlockParam)
    assert set(block) <= set(hints)
    for key, value in block.items():
        if key != "content":
            assert_sdk_accepts(hints[key], value)
    for part in block.get("content", []):
        assert_sdk_accepts(ImageBlockParam if part["type"] == "image" else TextBlockParam, part)


def test_calls_from_messages_content_lists_and_dicts() -> None:
    message = _message(CONTENT)
    assert calls_from_anthropic(message) == EXPECTED
    assert calls_from_anthropic(message.content) == EXPECTED
    assert calls_from_anthropic(message.model_dump()) == EXPECTED
    assert calls_from_anthropic(CONTENT) == EXPECTED
    assert calls_from_anthropic(ToolUseBlock.model_validate(CONTENT[2])) == EXPECTED[:1]
    assert calls_from_anthropic(_message(CONTENT[:2])) == []
    assert calls_from_anthropic({"role": "assistant", "content": "just text"}) == []
    assert json.loads(EXPECTED[0].arguments) == CONTENT[2]["input"]


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        (42, TypeError, "not int"),
        ([{"type": "tool_use", "id": "t", "name": "add", "input": "1,2"}], TypeError,
         "input must be an object, not str"),
        ([{"type": "tool_use", "name": "add", "input": {}}], ValueError, '"id" must be'),
        ([{"type": "tool_use", "id": "t", "input": {}}], ValueError, '"name" must be'),
        (["tool_use"], TypeError, r"content\[0\] must be a block"),
    ],
)  # fmt: skip
def test_malformed_objects_fail_clearly(obj: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as caught:
        calls_from_anthropic(obj)
    assert str(caught.value).startswith("calls_from_anthropic")


def test_tool_list_has_input_schema() -> None:
    tools = {tool["name"]: tool for tool in tools_for_anthropic(make_registry())}
    for tool in tools.values():
        assert_sdk_accepts(ToolParam, tool)
    assert tools["greet"] == {
        "name": "greet",
        "description": "Greet someone",
        "input_schema": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "polite": {"type": "boolean"}},
            "required": ["name"],
        },
    }
    assert "description" not in tools["fail"]


def test_one_user_message_of_tool_results_in_call_order() -> None:
    result = run_calls(make_registry(), calls_from_anthropic(_message(CONTENT)))
    message = results_to_anthropic(result)
    assert message["role"] == "user"
    blocks = message["content"]
    assert [b.get("tool_use_id") for b in blocks] == [
        "toolu_a",
        "toolu_f",
        "toolu_c",
        "toolu_n",
        None,
    ]
    assert [b.get("is_error") for b in blocks[:4]] == [False, True, False, False]
    assert blocks[0]["content"] == [{"type": "text", "text": "3"}]
    assert blocks[1]["content"] == [{"type": "text", "text": "Error: disk on fire: x"}]
    assert blocks[2]["content"] == [
        {"type": "text", "text": "chart of q3"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PIXEL}},
    ]
    # The context the note tool deferred follows the tool results, as the API requires.
    assert blocks[4] == {"type": "text", "text": "remember milk"}
    assert set(message) == {"role", "content"}
    for block in blocks[:4]:
        _assert_tool_result_block(block)
    assert_sdk_accepts(TextBlockParam, blocks[4])


def test_an_image_type_the_api_does_not_take_becomes_a_note() -> None:
    from toolray import ToolCallResult, ToolExecutionSuccess

    svg = {"type": "image", "data": "PHN2Zz4=", "mimeType": "image/svg+xml"}
    message = results_to_anthropic([ToolCallResult("t", ToolExecutionSuccess(None, [svg]))])
    assert message["content"][0]["content"] == [
        {"type": "text", "text": "[image/svg+xml image: type not supported]"}
    ]
