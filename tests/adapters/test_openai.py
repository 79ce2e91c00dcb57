"""``toolray.adapters.openai`` against the OpenAI SDK's own types (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai.types.chat import (
    ChatCompletion,
    ChatCompletionAssistantMessageParam,
    ChatCompletionFunctionToolParam,
    ChatCompletionMessage,
    ChatCompletionToolMessageParam,
    ChatCompletionUserMessageParam,
)
from openai.types.responses import FunctionToolParam, Response, ResponseFunctionToolCall
from openai.types.responses.response_input_item_param import FunctionCallOutput, Message

from toolray import (
    ToolCall,
    ToolOutput,
    ToolRegistry,
    define_tool,
    json_schema_parameters,
    text_block,
)
from toolray.adapters.openai import calls_from_openai, results_to_openai, tools_for_openai

from ._tools import PIXEL, assert_sdk_accepts, make_registry, run_calls

CHAT_CALLS = [
    {"id": "call_a", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}},
    {"id": "call_f", "type": "function", "function": {"name": "fail", "arguments": '{"why":"x"}'}},
    {"id": "call_c", "type": "function", "function": {"name": "chart", "arguments": '{"of":"q3"}'}},
]
EXPECTED = [
    ToolCall("call_a", "add", '{"a":1,"b":2}'),
    ToolCall("call_f", "fail", '{"why":"x"}'),
    ToolCall("call_c", "chart", '{"of":"q3"}'),
]


def _chat_message() -> ChatCompletionMessage:
    return ChatCompletionMessage.model_validate(
        {"role": "assistant", "content": None, "tool_calls": CHAT_CALLS}
    )


def _response(output: list[dict[str, Any]]) -> Response:
    return Response.model_validate(
        {
            "id": "resp_1",
            "created_at": 0,
            "model": "gpt-test",
            "object": "response",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }
    )


FUNCTION_ITEMS = [
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Working on it.", "annotations": []}],
    },
    {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "add",
     "arguments": '{"a":1,"b":2}', "status": "completed"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_f", "name": "fail",
     "arguments": '{"why":"x"}', "status": "completed"},
]  # fmt: skip


def test_chat_calls_from_sdk_objects_and_dicts() -> None:
    message = _chat_message()
    completion = ChatCompletion.model_validate(
        {
            "id": "cmpl_1",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        }
    )
    assert calls_from_openai(message) == EXPECTED
    assert calls_from_openai(message.tool_calls) == EXPECTED
    assert calls_from_openai(completion) == EXPECTED
    assert calls_from_openai(message.model_dump()) == EXPECTED
    assert calls_from_openai(CHAT_CALLS) == EXPECTED
    no_calls = ChatCompletionMessage.model_validate({"role": "assistant", "content": "done"})
    assert calls_from_openai(no_calls) == []


def test_responses_calls_skip_other_items() -> None:
    response = _response(FUNCTION_ITEMS)
    expected = EXPECTED[:2]
    assert calls_from_openai(response) == expected
    assert calls_from_openai(response.output) == expected
    assert calls_from_openai(response.model_dump()) == expected
    item = ResponseFunctionToolCall.model_validate(FUNCTION_ITEMS[2])
    assert calls_from_openai(item) == expected[:1]
    assert calls_from_openai(_response(FUNCTION_ITEMS[:2])) == []


@pytest.mark.parametrize(
    ("obj", "error", "match"),
    [
        (42, TypeError, "not int"),
        ({"foo": 1}, ValueError, r"keys \['foo'\]"),
        ([{"type": "function", "function": {"name": "add"}}], ValueError, '"id" must be'),
        ([{"id": "c", "type": "function", "function": {"name": "", "arguments": ""}}],
         ValueError, '"name" must be a non-empty string'),
        ([{"id": "c", "type": "function", "function": {"name": "add", "arguments": 7}}],
         TypeError, "arguments must be JSON text"),
        ([{"type": "custom", "id": "c", "custom": {"name": "x", "input": "y"}}],
         ValueError, "custom tool call"),
        ([{"name": "add"}], ValueError, "has no type"),
        ({"choices": []}, ValueError, "exactly one choice"),
        ({"role": "assistant", "tool_calls": "nope"}, TypeError, "tool_calls must be a list"),
        ([17], TypeError, "item 0 must be an object"),
    ],
)  # fmt: skip
def test_malformed_objects_fail_clearly(obj: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as caught:
        calls_from_openai(obj)
    assert str(caught.value).startswith("calls_from_openai")


def test_tool_lists_set_strict_where_the_schema_allows_it() -> None:
    registry = make_registry()
    chat = {tool["function"]["name"]: tool for tool in tools_for_openai(registry)}
    responses = {tool["name"]: tool for tool in tools_for_openai(registry, api="responses")}
    for tool in chat.values():
        assert_sdk_accepts(ChatCompletionFunctionToolParam, tool)
    for tool in responses.values():
        assert_sdk_accepts(FunctionToolParam, tool)
    assert chat["add"]["function"] == {
        "name": "add",
        "description": "Add two integers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "strict": True,
    }
    assert responses["add"] == {"type": "function", **chat["add"]["function"]}
    assert chat["greet"]["function"]["strict"] is False  # "polite" is optional
    assert "additionalProperties" not in chat["greet"]["function"]["parameters"]
    assert "description" not in chat["fail"]["function"]


def test_strict_true_forces_or_explains_and_false_never_sets_it() -> None:
    registry = make_registry()
    with pytest.raises(ValueError, match=r'"greet" cannot be strict: .*polite is optional'):
        tools_for_openai(registry, strict=True)
    assert {
        tool["strict"] for tool in tools_for_openai(registry, api="responses", strict=False)
    } == {False}
    with pytest.raises(ValueError, match='api must be "chat" or "responses"'):
        tools_for_openai(registry, api="completions")  # type: ignore[arg-type]


def test_strict_sends_one_of_as_any_of_and_refuses_open_objects() -> None:
    registry = ToolRegistry()
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": ["integer", "string"]},
            "meta": {"type": "object", "properties": {"k": {"type": "string"}}, "required": ["k"]},
        },
        "required": ["id", "meta"],
    }
    output = ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block("ok")])
    registry.register(
        define_tool(
            name="lookup",
            description="Look up",
            parameters=json_schema_parameters(schema),
            output=output,
            execute=lambda args, ctx: None,
        )
    )
    with pytest.raises(ValueError, match=r"parameters.properties.meta is an open object"):
        tools_for_openai(registry, strict=True)
    schema["properties"]["meta"]["additionalProperties"] = False  # type: ignore[index]
    closed = ToolRegistry()
    closed.register(
        define_tool(
            name="lookup",
            description="Look up",
            parameters=json_schema_parameters(schema),
            output=output,
            execute=lambda args, ctx: None,
        )
    )
    (tool,) = tools_for_openai(closed)
    assert tool["function"]["strict"] is True
    assert tool["function"]["parameters"]["properties"]["id"] == {
        "anyOf": [{"type": "integer"}, {"type": "string"}]
    }


def test_chat_results_in_call_order_with_errors_and_images() -> None:
    registry = make_registry()
    message = _chat_message()
    result = run_calls(registry, calls_from_openai(message))
    tool_messages = results_to_openai(result)
    assert [m.get("tool_call_id") for m in tool_messages] == ["call_a", "call_f", "call_c", None]
    assert tool_messages[0]["content"] == "3"
    assert tool_messages[1]["content"] == "Error: disk on fire: x"
    assert tool_messages[2]["content"] == (
        "chart of q3\n[image: in the user message after the tool results]"
    )
    assert tool_messages[3] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Image returned by tool call call_c:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}},
        ],
    }
    for tool_message in tool_messages[:3]:
        assert_sdk_accepts(ChatCompletionToolMessageParam, tool_message)
    assert_sdk_accepts(ChatCompletionUserMessageParam, tool_messages[3])
    # The whole next request's messages: the assistant turn as the SDK dumps it, then ours.
    assistant = message.model_dump(exclude_none=True)
    assert_sdk_accepts(ChatCompletionAssistantMessageParam, assistant)


def test_responses_results_carry_images_in_the_output() -> None:
    registry = make_registry()
    calls = [
        ToolCall("call_c", "chart", '{"of":"q3"}'),
        ToolCall("call_x", "nope", "{}"),
        ToolCall("call_n", "note", '{"what":"milk"}'),
    ]
    items = results_to_openai(run_calls(registry, calls), api="responses")
    assert items[0] == {
        "type": "function_call_output",
        "call_id": "call_c",
        "output": [
            {"type": "input_text", "text": "chart of q3"},
            {
                "type": "input_image",
                "image_url": f"data:image/png;base64,{PIXEL}",
                "detail": "auto",
            },
        ],
    }
    assert items[1]["output"].startswith("Error: ")
    assert "nope" in items[1]["output"]
    assert items[2] == {"type": "function_call_output", "call_id": "call_n", "output": "noted"}
    assert items[3] == {
        "role": "user",
        "content": [{"type": "input_text", "text": "remember milk"}],
    }
    for item in items[:3]:
        assert_sdk_accepts(FunctionCallOutput, item)
    assert_sdk_accepts(Message, items[3])


def test_arguments_survive_the_round_trip_unparsed() -> None:
    # Invalid JSON from the model is passed on as-is; the pipeline reports it to the model.
    registry = make_registry()
    call = calls_from_openai([{"type": "function_call", "call_id": "c", "name": "add",
                               "arguments": '{"a": 1,'}])  # fmt: skip
    (message,) = results_to_openai(run_calls(registry, call))
    assert message["content"].startswith("Error: ")
    assert json.loads(json.dumps(message)) == message


def test_results_refuse_what_is_not_a_batch_result() -> None:
    with pytest.raises(TypeError, match="expected a ToolBatchResult"):
        results_to_openai(42)
    with pytest.raises(TypeError, match=r"results\[0\] is dict"):
        results_to_openai([{"call_id": "c"}])
