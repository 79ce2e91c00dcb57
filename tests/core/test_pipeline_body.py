"""P-BODY: body invocation and ``ToolRunContext``.

Python mapping: the body is ``execute(args, ctx)`` where ``ctx`` is a ``ToolRunContext``
carrying the execution's identity plus ``defer_context(message)`` and ``conclude_turn()``.
Every entry has a Python meaning.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import pytest

from toolray import (
    AbortController,
    Accept,
    Block,
    FrozenDict,
    ReplaceValue,
    ToolArgsError,
    ToolExecutionSuccess,
    ToolOutput,
    ToolRegistry,
    ToolRunContext,
    text_block,
)
from toolray.schema import validate_args
from toolray.testing import Gate

from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    ABORTED_INFO,
    ABORTED_MSG,
    Probe,
    assert_failure,
    call,
    error_wire,
    make_tool,
    msg,
    raw_tool,
    texts,
    yield_turns,
)

META_OUT = ToolOutput(
    schema={"type": "string"},
    render=lambda a, v: [text_block(v)],
    presentation_meta=lambda a, v: {"projected": v},
)


async def test_p_body_1_body_gets_frozen_args_and_the_run_context(
    reg: ToolRegistry, probe: Probe
) -> None:
    seen: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        seen.append((args, ctx))
        return "ok"

    probe.register("echo", body)
    inp = call(arguments={"text": "x"}, scope="agent", call_id="c-1", root_call_id="r-1")
    await reg.execute(inp)
    args, ctx = seen[0]
    execution = probe.seen["pre"][0]
    assert isinstance(ctx, ToolRunContext)
    assert type(args) is FrozenDict
    assert args == {"text": "x"}
    assert ctx.arguments == args
    assert (ctx.call_id, ctx.root_call_id, ctx.name, ctx.scope) == ("c-1", "r-1", "echo", "agent")
    assert ctx.token is execution.token
    assert ctx.parent is None
    assert ctx.signal is inp.signal
    assert callable(ctx.defer_context)
    assert callable(ctx.conclude_turn)


@pytest.mark.parametrize(
    ("delegate", "expected"),
    [(True, (ABORTED_MSG, ABORTED_INFO)), (False, (ABORTED_BEFORE, ABD_INFO))],
    ids=["P-BODY-2-invoked", "P-BODY-2-not-invoked"],
)
async def test_p_body_2_body_invoked_decides_aborted_vs_before_dispatch(
    reg: ToolRegistry, probe: Probe, delegate: bool, expected: tuple[str, tuple[str, str]]
) -> None:
    probe.register()
    caller = AbortController()

    async def wrapper(execution: Any, next_: Any) -> Any:
        result = await next_() if delegate else ToolExecutionSuccess("v", [text_block("v")])
        caller.abort("user")
        return result

    reg.on_execute(wrapper)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, *expected)
    assert probe.counts["body"] == (1 if delegate else 0)


async def test_p_body_3_name_not_visible_at_dispatch_is_unknown_tool(
    reg: ToolRegistry, probe: Probe
) -> None:
    dispose = probe.register("ephemeral")
    unknown = await reg.execute(call("nope"))
    assert unknown.to_wire() == error_wire(
        'unknown tool "nope"', ("ToolNotFoundError", "UNKNOWN_TOOL")
    )
    assert probe.counts["post"] == 1

    async def unregister(execution: Any, next_: Any) -> Any:
        dispose()
        return await next_()

    reg.on_pre_execute(unregister)
    gone = await reg.execute(call("ephemeral"))
    assert gone.error.message == 'unknown tool "ephemeral"'  # type: ignore[union-attr]
    assert probe.counts["body"] == 0
    assert probe.counts["post"] == 2


async def test_p_body_4_define_tool_validates_arguments_inside_the_body(
    reg: ToolRegistry, probe: Probe
) -> None:
    parameters = {"path": {"type": "string", "required": True}, "n": {"type": "integer"}}
    probe.register("read", parameters=parameters)
    missing = await reg.execute(call("read", {}))
    message = 'invalid arguments: missing required property "path"'
    assert missing.to_wire() == error_wire(message, ("ToolArgsError", "INVALID_ARGS"))
    assert probe.counts["body"] == 1  # validation happens in the body: it counts as invoked
    bad = {"n": "x"}
    violations = validate_args(parameters, bad)
    several = await reg.execute(call("read", bad))
    assert len(violations) == 2
    assert several.error.message == "invalid arguments: " + "; ".join(violations)  # type: ignore[union-attr]
    err = ToolArgsError(violations)
    assert (err.code, tuple(err.violations)) == ("INVALID_ARGS", tuple(violations))


async def test_p_body_5_raw_definitions_are_not_validated() -> None:
    reg = ToolRegistry()
    seen: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        seen.append(args)
        return "ran"

    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    reg.register(raw_tool("raw", body, parameters=schema))
    result = await reg.execute(call("raw", {}))
    assert result.content == [text_block("ran")]
    assert seen == [{}]


async def test_p_body_6_deferred_contexts_order_and_survival() -> None:
    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("nested-1"))
        ctx.defer_context(msg("nested-2"))
        if args.get("text") == "throw":
            raise RuntimeError("composite failed")
        return "ok"

    async def wrapper(execution: Any, next_: Any) -> Any:
        result = await next_()
        if result.is_error:
            return result
        contexts = (*result.additional_contexts, msg("wrapper"))
        return dataclasses.replace(result, additional_contexts=contexts)

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        if execution.arguments.get("text") == "block":
            return Block([text_block("blocked")], additional_contexts=(msg("block"),))
        return Accept(additional_contexts=(msg("post"),))

    reg = ToolRegistry()
    reg.on_execute(wrapper)
    reg.on_post_execute(post)
    reg.register(make_tool("echo", body))
    ok = await reg.execute(call(arguments={"text": "ok"}))
    assert texts(ok.additional_contexts) == ["nested-1", "nested-2", "wrapper", "post"]
    thrown = await reg.execute(call(arguments={"text": "throw"}))
    assert thrown.error.message == "composite failed"  # type: ignore[union-attr]
    assert texts(thrown.additional_contexts) == ["nested-1", "nested-2", "post"]
    blocked = await reg.execute(call(arguments={"text": "block"}))
    assert texts(blocked.additional_contexts) == ["block"]


async def test_p_body_7_deferred_contexts_survive_cancellation() -> None:
    reg = ToolRegistry()
    caller = AbortController()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("child"))
        caller.abort("user")
        return "ok"

    reg.register(make_tool("echo", body))
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
    assert texts(result.additional_contexts) == ["child"]


async def test_p_body_8_conclude_turn_marks_successes_only_and_cannot_be_invented() -> None:
    async def body(args: Any, ctx: Any) -> str:
        if args.get("text") != "plain":
            ctx.conclude_turn()
        if args.get("text") == "throw":
            raise RuntimeError("failed after concluding")
        return "done"

    reg = ToolRegistry()
    reg.register(make_tool("echo", body))
    concluded = await reg.execute(call(arguments={"text": "conclude"}))
    assert concluded.concludes_turn is True
    failed = await reg.execute(call(arguments={"text": "throw"}))
    assert failed.is_error
    assert failed.concludes_turn is False
    plain = await reg.execute(call(arguments={"text": "plain"}))
    assert plain.concludes_turn is False

    async def invent(execution: Any, next_: Any) -> Any:
        result = await next_()
        return dataclasses.replace(result, concludes_turn=True)

    reg.on_execute(invent)
    invented = await reg.execute(call(arguments={"text": "plain"}))
    assert invented.concludes_turn is False


async def test_p_body_8_short_circuit_cannot_conclude() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())

    async def short(execution: Any, next_: Any) -> Any:
        return ToolExecutionSuccess("v", [text_block("v")], concludes_turn=True)

    reg.on_execute(short)
    result = await reg.execute(call())
    assert not result.is_error
    assert result.concludes_turn is False


async def test_p_body_9_conclusion_survives_replacements_and_not_failures() -> None:
    decisions: dict[str, Any] = {
        "accept-content": Accept(content=[text_block("policy content")]),
        "replace-value": ReplaceValue("policy value"),
        "block": Block([text_block("blocked")]),
    }

    async def body(args: Any, ctx: Any) -> str:
        ctx.conclude_turn()
        return "done"

    expected = {"accept-content": True, "replace-value": True, "block": False}
    for key, decision in decisions.items():
        reg = ToolRegistry()
        reg.register(make_tool("echo", body))

        async def post(execution: Any, result: Any, next_: Any, d: Any = decision) -> Any:
            return d

        reg.on_post_execute(post)
        result = await reg.execute(call())
        assert result.concludes_turn is expected[key], key
        assert result.is_error is (key == "block")

    reg = ToolRegistry()
    caller = AbortController()

    async def aborting_post(execution: Any, result: Any, next_: Any) -> Any:
        caller.abort("user")
        return await next_()

    reg.register(make_tool("echo", body))
    reg.on_post_execute(aborting_post)
    aborted = await reg.execute(call(signal=caller.signal))
    assert_failure(aborted, ABORTED_MSG, ABORTED_INFO)
    assert aborted.concludes_turn is False


async def test_p_body_10_contexts_deferred_after_collection_are_ignored() -> None:
    reg = ToolRegistry()
    leaked: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        leaked.append(ctx)
        return "ok"

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        leaked[0].defer_context(msg("late"))  # the body's work leaked past its return
        leaked[0].conclude_turn()
        return await next_()

    reg.register(make_tool("echo", body))
    reg.on_post_execute(post)
    result = await reg.execute(call())
    assert not result.is_error
    assert result.additional_contexts == ()
    assert result.concludes_turn is False


async def test_p_body_11_uncooperative_body_is_awaited_before_aborted() -> None:
    reg = ToolRegistry()
    caller = AbortController()
    started, release = asyncio.Event(), Gate()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("deferred"))
        started.set()
        await release.wait()  # ignores its signal
        return "late"

    reg.register(make_tool("echo", body))
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    caller.abort("user")
    await yield_turns()
    assert not task.done()
    release.open()
    result = await task
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
    assert texts(result.additional_contexts) == ["deferred"]


async def test_p_body_12_nested_dispatch_has_no_meta_and_forwards_conclusion() -> None:
    reg = ToolRegistry()
    nested: list[Any] = []

    async def leaf(args: Any, ctx: Any) -> str:
        if args.get("text") in ("conclude", "blocked"):
            ctx.conclude_turn()
        return str(args.get("text"))

    async def composite(args: Any, ctx: Any) -> str:
        inner = await reg.execute(
            call(
                "leaf",
                {"text": args["text"]},
                call_id=f"{ctx.call_id}:inner",
                signal=ctx.signal,
                parent=ctx.token,
                scope=ctx.scope,
            )
        )
        nested.append(inner)
        if not inner.is_error and inner.concludes_turn:
            ctx.conclude_turn()
        return "composite"

    async def block_leaf(execution: Any, result: Any, next_: Any) -> Any:
        if execution.name == "leaf" and execution.arguments.get("text") == "blocked":
            return Block([text_block("blocked")])
        return await next_()

    reg.register(make_tool("leaf", leaf, output=META_OUT))
    reg.register(make_tool("composite", composite, output=META_OUT))
    reg.on_post_execute(block_leaf)
    top = await reg.execute(call("leaf", {"text": "x"}))
    assert top.meta == {"projected": "x"}
    outer = await reg.execute(call("composite", {"text": "conclude"}))
    assert nested[0].meta is None
    assert not nested[0].is_error
    assert nested[0].concludes_turn is True
    assert outer.concludes_turn is True
    assert outer.meta == {"projected": "composite"}
    recovered = await reg.execute(call("composite", {"text": "blocked"}))
    assert nested[1].is_error
    assert nested[1].concludes_turn is False
    assert recovered.concludes_turn is False


async def test_p_body_1_sync_body_gets_the_same_run_context_in_a_thread(
    reg: ToolRegistry, probe: Probe
) -> None:
    seen: list[Any] = []

    def body(args: Any, ctx: Any) -> str:
        seen.append((args, ctx, threading.current_thread() is threading.main_thread()))
        ctx.defer_context(msg("from-thread"))
        return "sync"

    probe.register("echo", body)
    inp = call(arguments={"text": "x"})
    result = await reg.execute(inp)
    args, ctx, on_main = seen[0]
    assert not on_main  # a sync body runs off the event loop
    assert isinstance(ctx, ToolRunContext)
    assert args == {"text": "x"}
    assert ctx.token is probe.seen["pre"][0].token
    assert ctx.signal is inp.signal
    assert result.content == [text_block("sync")]
    assert texts(result.additional_contexts) == ["from-thread"]


async def test_p_body_11_uncooperative_sync_body_is_awaited() -> None:
    reg = ToolRegistry()
    caller = AbortController()
    started, release = Gate(), Gate()

    def body(args: Any, ctx: Any) -> str:
        started.open()
        release.wait_sync()  # a blocking body that ignores its signal
        return "late"

    reg.register(make_tool("echo", body))
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    caller.abort("user")
    await yield_turns()
    assert not task.done()
    release.open()
    result = await task
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
