"""P-POST: the post-execute waterfall.

Python mapping: ``{kind:'accept', content}`` is ``Accept(content=…)``, ``{kind:'accept',
value}`` is ``ReplaceValue(value)``, ``{kind:'block', feedback}`` is ``Block(feedback)``.

Entries without a direct Python meaning:

- P-POST-5 (an accept decision carrying both a ``value`` and a ``content`` key): replacing
  the content and replacing the value are two distinct decision types, so a decision that
  does both cannot be built.
- P-POST-6, ``value: undefined`` half: Python has no ``undefined`` and ``None`` is valid
  JSON; the analog (a non-JSON replacement value) is tested.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toolray import (
    AbortController,
    Accept,
    Block,
    HarnessError,
    ReplaceValue,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolOutput,
    ToolRegistry,
    text_block,
)

from . import _pipeline_helpers as h
from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    ABORTED_INFO,
    ABORTED_MSG,
    NOT_LOSSLESS,
    Probe,
    assert_failure,
    call,
    error_wire,
    make_tool,
    msg,
    texts,
)

PROJECTED = ToolOutput(
    schema={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "additionalProperties": False,
    },
    render=lambda a, v: [text_block(f"render:{v['text']}")],
    presentation_meta=lambda a, v: {"projected": v["text"]},
)


async def _body_value(args: Any, ctx: Any) -> Any:
    ctx.defer_context(msg("deferred"))
    ctx.conclude_turn()
    return {"text": "body"}


def _post(decision: Any) -> Callable[..., Awaitable[Any]]:
    async def post(execution: Any, result: Any, next_: Any) -> Any:
        return decision

    return post


Scenario = Callable[[ToolRegistry, Probe], Awaitable[Any]]
RUNS: dict[str, Scenario] = {
    "success": h.sc_success,
    "body-failure": h.sc_body_throws,
    "unknown-tool": h.sc_unknown,
    "pre-deny": h.sc_pre_deny,
    "ask-deny": h.sc_ask_deny,
    "guard-deny": h.sc_guard_deny,
    "aborted-after-gates": h.sc_aborted_in_gates,
    "aborted-in-dispatch": h.sc_fused_aborted,
    "aborted": h.sc_aborted_after_body,
    "timeout": h.sc_timeout,
}
SKIPS: dict[str, Scenario] = {
    "args-snapshot": h.sc_args_fail,
    "pre-aborted": h.sc_pre_aborted,
    "collapse": h.sc_collapse,
    "pre-throw": h.sc_pre_throws,
    "approval-throw": h.sc_approval_throws,
    "guard-throw": h.sc_guard_throws,
    "wrapper-throw": h.sc_around_throws,
    "wrapper-success-bad-value": h.sc_wrapper_bad_value,
    "wrapper-success-tool-gone": h.sc_wrapper_tool_gone,
}


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [(s, 1) for s in RUNS.values()] + [(s, 0) for s in SKIPS.values()],
    ids=[f"P-POST-1-runs-{k}" for k in RUNS] + [f"P-POST-1-skips-{k}" for k in SKIPS],
)
async def test_p_post_1_which_outcomes_enter_post_execute(
    reg: ToolRegistry, probe: Probe, scenario: Scenario, expected: int
) -> None:
    await scenario(reg, probe)
    assert probe.counts["post"] == expected
    assert probe.counts["result"] == 1


async def test_p_post_2_next_or_no_listener_accepts_unchanged() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _body_value, output=PROJECTED))
    bare = await reg.execute(call())
    seen: list[Any] = []

    async def passthrough(execution: Any, result: Any, next_: Any) -> Any:
        seen.append(result)
        return await next_()

    reg.on_post_execute(passthrough)
    passed = await reg.execute(call())
    for result in (bare, passed):
        assert result.value == {"text": "body"}
        assert result.content == [text_block("render:body")]
        assert result.meta == {"projected": "body"}
        assert texts(result.additional_contexts) == ["deferred"]
        assert result.concludes_turn is True
    assert seen[0] == passed


async def test_p_post_3_accept_content_keeps_everything_else() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _body_value, output=PROJECTED))
    reg.on_post_execute(_post(Accept(content=[text_block("policy content")])))
    result = await reg.execute(call())
    assert isinstance(result, ToolExecutionSuccess)
    assert result.content == [text_block("policy content")]
    assert result.value == {"text": "body"}
    assert result.meta == {"projected": "body"}
    assert texts(result.additional_contexts) == ["deferred"]
    assert result.concludes_turn is True


async def test_p_post_3_accept_content_on_a_failure_stays_a_failure() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", h._raise_async))
    reg.on_post_execute(_post(Accept(content=[text_block("softened")])))
    result = await reg.execute(call())
    assert isinstance(result, ToolExecutionFailure)
    assert result.error.message == "listener broke"
    assert result.content == [text_block("softened")]


async def test_p_post_4_replace_value_recomputes_content_and_meta() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _body_value, output=PROJECTED))
    decision = ReplaceValue({"text": "policy value"}, additional_contexts=(msg("post"),))
    reg.on_post_execute(_post(decision))
    result = await reg.execute(call())
    assert result.value == {"text": "policy value"}
    assert result.content == [text_block("render:policy value")]
    assert result.meta == {"projected": "policy value"}
    assert texts(result.additional_contexts) == ["deferred", "post"]


@pytest.mark.parametrize(
    ("value", "violation"),
    [({"text": 1}, '"value.text" must be a string'), ({"text": {1}}, "value is not lossless JSON")],
    ids=["P-POST-6-schema", "P-POST-6-not-lossless"],
)
async def test_p_post_6_invalid_replacement_value(value: Any, violation: str) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _body_value, output=PROJECTED))
    reg.on_post_execute(_post(ReplaceValue(value)))
    result = await reg.execute(call())
    assert isinstance(result, ToolExecutionFailure)
    assert not hasattr(result, "value")
    assert result.error.info == ToolErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")
    assert violation in result.error.message


async def test_p_post_7_value_replacement_on_a_failure_is_an_error() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", h._raise_async))
    reg.on_post_execute(_post(ReplaceValue("recovered")))
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(
        "tools/post-execute cannot replace the value of a failed result"
    )


async def test_p_post_8_value_replacement_after_the_tool_disappeared() -> None:
    reg = ToolRegistry()
    dispose = reg.register(make_tool())

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        dispose()
        return ReplaceValue("late")

    reg.on_post_execute(post)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(
        'unknown tool "echo"', ("ToolNotFoundError", "UNKNOWN_TOOL")
    )


async def test_p_post_9_block_is_a_valueless_failure_with_verbatim_feedback() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _body_value, output=PROJECTED))
    feedback = [text_block("corrective feedback")]
    reg.on_post_execute(_post(Block(feedback)))
    result = await reg.execute(call())
    assert isinstance(result, ToolExecutionFailure)
    assert result.to_wire() == {
        "isError": True,
        "content": feedback,
        "error": {"message": "corrective feedback"},
    }
    assert not hasattr(result, "value")
    assert result.concludes_turn is False
    assert result.meta is None


@pytest.mark.parametrize(
    ("feedback", "message"),
    [
        ([], "tool result blocked by post-execute policy"),
        ([{"type": "reasoning"}], "[reasoning content]"),
        ([text_block("")], "tool result blocked by post-execute policy"),
        (
            [
                text_block("a"),
                {"type": "image", "data": "AA==", "mimeType": "image/png"},
                text_block("b"),
            ],
            "a\n[image content]\nb",
        ),
    ],
    ids=["P-POST-10-empty", "P-POST-10-reasoning", "P-POST-10-empty-text", "P-POST-10-mixed"],
)
async def test_p_post_10_block_message_derivation(feedback: list[Any], message: str) -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_post_execute(_post(Block(feedback)))
    result = await reg.execute(call())
    assert result.error.message == message  # type: ignore[union-attr]
    assert result.content == feedback


async def test_p_post_11_block_keeps_only_its_own_contexts() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _body_value, output=PROJECTED))

    async def wrapper(execution: Any, next_: Any) -> Any:
        result = await next_()
        contexts = (*result.additional_contexts, msg("wrapper"))
        return dataclasses.replace(result, additional_contexts=contexts)

    reg.on_execute(wrapper)
    reg.on_post_execute(_post(Block([text_block("no")], additional_contexts=(msg("block"),))))
    result = await reg.execute(call())
    assert texts(result.additional_contexts) == ["block"]


async def test_p_post_12_accept_context_order() -> None:
    reg = ToolRegistry()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("nested-1"))
        ctx.defer_context(msg("nested-2"))
        return "ok"

    async def wrapper(execution: Any, next_: Any) -> Any:
        result = await next_()
        contexts = (*result.additional_contexts, msg("wrapper"))
        return dataclasses.replace(result, additional_contexts=contexts)

    async def outer(execution: Any, result: Any, next_: Any) -> Any:
        downstream = await next_()
        contexts = (msg("post"), *downstream.additional_contexts)
        return Accept(additional_contexts=contexts)

    reg.register(make_tool("echo", body))
    reg.on_execute(wrapper)
    reg.on_post_execute(outer)
    result = await reg.execute(call())
    assert texts(result.additional_contexts) == ["nested-1", "nested-2", "wrapper", "post"]


async def test_p_post_13_value_replacement_adds_no_contexts() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_post_execute(_post(ReplaceValue("replaced")))
    result = await reg.execute(call())
    assert result.value == "replaced"  # type: ignore[union-attr]
    assert result.additional_contexts == ()


@pytest.mark.parametrize(
    ("exc", "info"),
    [
        (RuntimeError("post hook broke"), None),
        (HarnessError("post hook broke", "POST_BROKE"), ("HarnessError", "POST_BROKE")),
    ],
    ids=["P-POST-14-plain", "P-POST-14-harness"],
)
async def test_p_post_14_throwing_listener(exc: Exception, info: Any) -> None:
    reg = ToolRegistry()
    reg.register(make_tool())

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        raise exc

    reg.on_post_execute(post)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("post hook broke", info)


@pytest.mark.parametrize(
    "decision",
    [Block([{"type": "text", "text": {1}}]), Accept(content=[{"type": "text", "text": {2}}])],
    ids=["P-POST-15-block", "P-POST-15-accept"],
)
async def test_p_post_15_non_lossless_projection_is_a_safe_error(decision: Any) -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    reg.on_post_execute(_post(decision))
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(NOT_LOSSLESS)


async def test_p_post_16_late_post_success_becomes_aborted_with_contexts() -> None:
    reg = ToolRegistry()
    caller = AbortController()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("child"))
        return "ok"

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        caller.abort("user")
        return Accept(additional_contexts=(msg("post"),))

    reg.register(make_tool("echo", body))
    reg.on_post_execute(post)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
    assert texts(result.additional_contexts) == ["child", "post"]


async def test_p_post_16_short_circuit_overtaken_in_post_is_before_dispatch(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    caller = AbortController()

    async def short(execution: Any, next_: Any) -> Any:
        return ToolExecutionSuccess("v", [text_block("v")])

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        caller.abort("user")
        return await next_()

    reg.on_execute(short)
    reg.on_post_execute(post)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0


async def test_p_post_17_post_failure_after_cancellation_is_kept() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    caller = AbortController()

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        caller.abort("user")
        raise HarnessError("post-policy failed", "POST_FAILURE")

    reg.on_post_execute(post)
    result = await reg.execute(call(signal=caller.signal))
    assert result.to_wire() == error_wire("post-policy failed", ("HarnessError", "POST_FAILURE"))


async def test_p_post_18_post_execute_keeps_the_model_call_id(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ids: list[str] = []

    async def replace(execution: Any, result: Any, next_: Any) -> Any:
        ids.append(execution.call_id)
        return Accept(content=[text_block("replaced")])

    reg.on_post_execute(replace)
    result = await reg.execute(call(call_id="call_abc"))
    assert ids == ["call_abc"]
    assert probe.seen["result"][0].call_id == "call_abc"
    assert result.content == [text_block("replaced")]
