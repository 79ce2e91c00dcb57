"""P-CANCEL: cooperative cancellation.

Every entry has a Python meaning. Aborts "while X awaits" are issued from inside X (the
caller's controller is aborted by the listener itself), which places the abort exactly at
that point without timing; "never abandoned" entries use a ``Gate`` and a task.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toolray import (
    AbortController,
    Accept,
    Deny,
    HarnessError,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolRegistry,
    text_block,
)
from toolray.testing import Gate

from . import _pipeline_helpers as h
from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    ABORTED_INFO,
    ABORTED_MSG,
    Probe,
    aborted_signal,
    assert_failure,
    call,
    code_of,
    error_wire,
    msg,
    replacing,
    texts,
    yield_turns,
)


async def _checkpoint(point: int, reg: ToolRegistry, probe: Probe) -> Any:
    caller = AbortController()
    wrapper_ctrl = AbortController()
    if point == 1:
        probe.register()
        return await reg.execute(call(signal=aborted_signal()))
    if point == 3:
        probe.register()
        reg.guard(lambda execution: caller.abort("user"))  # aborts, then abstains
    elif point == 4:
        probe.register()
        reg.on_execute(replacing(lambda: aborted_signal("deadline")))
    elif point == 5:

        async def body(args: Any, ctx: Any) -> str:
            wrapper_ctrl.abort("deadline")
            return "ok"

        probe.register("echo", body)
        reg.on_execute(replacing(lambda: wrapper_ctrl.signal))
    elif point == 6:
        probe.register()

        async def after(execution: Any, next_: Any) -> Any:
            result = await next_()
            caller.abort("user")
            return result

        reg.on_execute(after)
    elif point == 7:
        probe.register()

        async def post(execution: Any, result: Any, next_: Any) -> Any:
            caller.abort("user")
            return await next_()

        reg.on_post_execute(post)
    return await reg.execute(call(signal=caller.signal))


@pytest.mark.parametrize(
    ("point", "code", "body"),
    [
        (1, "ABORTED_BEFORE_DISPATCH", 0),
        (3, "ABORTED_BEFORE_DISPATCH", 0),
        (4, "ABORTED_BEFORE_DISPATCH", 0),
        (5, "ABORTED", 1),
        (6, "ABORTED", 1),
        (7, "ABORTED", 1),
    ],
    ids=[
        "P-CANCEL-1-entry",
        "P-CANCEL-1-after-guards",
        "P-CANCEL-1-body-start",
        "P-CANCEL-1-after-body-fused",
        "P-CANCEL-1-after-waterfall",
        "P-CANCEL-1-after-post",
    ],
)
async def test_p_cancel_1_checkpoints(
    reg: ToolRegistry, probe: Probe, point: int, code: str, body: int
) -> None:
    result = await _checkpoint(point, reg, probe)
    assert code_of(result) == code
    assert probe.counts["body"] == body


async def test_p_cancel_1_running_code_is_never_interrupted() -> None:
    reg = ToolRegistry()
    caller = AbortController()
    trace: list[str] = []

    async def body(args: Any, ctx: Any) -> str:
        trace.append("before")
        caller.abort("user")
        await asyncio.sleep(0)
        trace.append("after")
        return "ok"

    reg.register(h.make_tool("echo", body))
    result = await reg.execute(call(signal=caller.signal))
    assert trace == ["before", "after"]
    assert code_of(result) == "ABORTED"


async def test_p_cancel_1_gate_check_acts_after_guards_not_before(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    caller = AbortController()

    async def pre(execution: Any, next_: Any) -> Any:
        caller.abort("user")
        return await next_()

    reg.on_pre_execute(pre)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["guard"] == 1  # only an approval "cancelled" stops before guards
    assert probe.counts["around"] == 0


Scenario = Callable[[ToolRegistry, Probe], Awaitable[Any]]


async def _wrapper_short_overtaken(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    caller = AbortController()

    async def short(execution: Any, next_: Any) -> Any:
        caller.abort("user")
        return ToolExecutionSuccess("v", [text_block("v")])

    reg.on_execute(short)
    return await reg.execute(call(signal=caller.signal))


@pytest.mark.parametrize(
    "scenario",
    [h.sc_pre_aborted, h.sc_aborted_in_gates, h.sc_fused_aborted, _wrapper_short_overtaken],
    ids=[
        "P-CANCEL-2-entry",
        "P-CANCEL-2-gates",
        "P-CANCEL-2-wrapper-signal",
        "P-CANCEL-2-short-circuit",
    ],
)
async def test_p_cancel_2_before_dispatch_means_the_body_never_ran(
    reg: ToolRegistry, probe: Probe, scenario: Scenario
) -> None:
    result = await scenario(reg, probe)
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0


async def test_p_cancel_3_aborted_only_for_an_invoked_body_that_would_succeed(
    reg: ToolRegistry, probe: Probe
) -> None:
    result = await h.sc_aborted_after_body(reg, probe)
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
    assert probe.counts["body"] == 1


async def _cancel_then(kind: str, reg: ToolRegistry, probe: Probe) -> Any:
    caller = AbortController()

    async def pre(execution: Any, next_: Any) -> Any:
        caller.abort("user")
        if kind == "deny":
            return Deny("denied")
        raise RuntimeError("pre failed")

    async def wrapper(execution: Any, next_: Any) -> Any:
        caller.abort("user")
        raise HarnessError("wrapper failed", "WRAPPER_FAILURE")

    async def tool_owned(args: Any, ctx: Any) -> Any:
        caller.abort("user")
        await ctx.signal.wait()
        raise HarnessError("tool failed", "TOOL_FAILURE")

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        caller.abort("user")
        raise HarnessError("post failed", "POST_FAILURE")

    async def invalid_output(args: Any, ctx: Any) -> Any:
        caller.abort("user")
        return 42

    body = {"tool": tool_owned, "invalid-output": invalid_output}.get(kind)
    probe.register("echo", body)
    if kind in ("deny", "pre-throw"):
        reg.on_pre_execute(pre)
    if kind == "wrapper":
        reg.on_execute(wrapper)
    if kind == "post":
        reg.on_post_execute(post)
    return await reg.execute(call(signal=caller.signal))


@pytest.mark.parametrize(
    ("kind", "message", "code", "body"),
    [
        ("deny", "denied", None, 0),
        ("pre-throw", "pre failed", None, 0),
        ("wrapper", "wrapper failed", "WRAPPER_FAILURE", 0),
        ("tool", "tool failed", "TOOL_FAILURE", 1),
        ("post", "post failed", "POST_FAILURE", 1),
        ("invalid-output", None, "INVALID_TOOL_OUTPUT", 1),
    ],
    ids=[
        "P-CANCEL-4-deny",
        "P-CANCEL-4-pre-throw",
        "P-CANCEL-4-wrapper",
        "P-CANCEL-4-tool-owned",
        "P-CANCEL-4-post",
        "P-CANCEL-4-invalid-output",
    ],
)
async def test_p_cancel_4_specific_errors_beat_cancellation(
    reg: ToolRegistry, probe: Probe, kind: str, message: str | None, code: str | None, body: int
) -> None:
    result = await _cancel_then(kind, reg, probe)
    assert result.is_error
    assert code_of(result) == code
    if message is not None:
        assert result.error.message == message
    assert probe.counts["body"] == body


async def test_p_cancel_4_invalid_args_beat_cancellation(reg: ToolRegistry, probe: Probe) -> None:
    caller = AbortController()
    probe.register(parameters={"path": {"type": "string", "required": True}})

    async def abort_first(execution: Any, next_: Any) -> Any:
        result = await next_()
        caller.abort("user")
        return result

    reg.on_execute(abort_first)
    result = await reg.execute(call(signal=caller.signal))
    assert code_of(result) == "INVALID_ARGS"


async def test_p_cancel_5_short_circuit_overtaken_keeps_wrapper_contexts(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    caller = AbortController()

    async def short(execution: Any, next_: Any) -> Any:
        caller.abort("user")
        return ToolExecutionSuccess("v", [text_block("v")], additional_contexts=(msg("around"),))

    reg.on_execute(short)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert texts(result.additional_contexts) == ["around"]
    assert probe.counts["body"] == 0


async def test_p_cancel_6_cooperative_stop_after_caller_abort_is_aborted() -> None:
    reg = ToolRegistry()
    caller, wrapper_ctrl = AbortController(), AbortController()
    started = asyncio.Event()
    body_signals: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        body_signals.append(ctx.signal)
        started.set()
        await ctx.signal.wait()
        return "stopped cooperatively"

    reg.on_execute(replacing(lambda: wrapper_ctrl.signal))
    reg.register(h.make_tool("echo", body))
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    caller.abort("user")
    result = await task
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
    assert body_signals[0].aborted
    assert not wrapper_ctrl.signal.aborted


async def test_p_cancel_7_wrapper_signal_abort_makes_body_success_aborted() -> None:
    reg = ToolRegistry()
    wrapper_ctrl = AbortController()
    seen: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        wrapper_ctrl.abort("deadline")
        return "ok"

    async def classify(execution: Any, next_: Any) -> Any:
        previous = execution.signal
        execution.signal = wrapper_ctrl.signal
        try:
            result = await next_()
        finally:
            execution.signal = previous
        seen.append(result)
        return ToolExecutionFailure(
            ToolFailure("deadline hit", ToolErrorInfo("ToolTimeoutError", "TOOL_TIMEOUT")),
            [text_block("Error: deadline hit")],
        )

    reg.on_execute(classify)
    reg.register(h.make_tool("echo", body))
    caller = AbortController()
    result = await reg.execute(call(signal=caller.signal))
    assert seen[0].to_wire() == error_wire(ABORTED_MSG, ABORTED_INFO)  # body level
    assert result.to_wire() == error_wire("deadline hit", ("ToolTimeoutError", "TOOL_TIMEOUT"))
    assert not caller.signal.aborted


async def test_p_cancel_8_cancellation_results_carry_every_context() -> None:
    reg = ToolRegistry()
    caller = AbortController()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("deferred"))
        return "ok"

    async def wrapper(execution: Any, next_: Any) -> Any:
        result = await next_()
        return dataclasses.replace(
            result, additional_contexts=(*result.additional_contexts, msg("wrapper"))
        )

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        caller.abort("user")
        return Accept(additional_contexts=(msg("post"),))

    reg.register(h.make_tool("echo", body))
    reg.on_execute(wrapper)
    reg.on_post_execute(post)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
    assert texts(result.additional_contexts) == ["deferred", "wrapper", "post"]


@pytest.mark.parametrize("where", ["finalize", "observer"], ids=lambda w: f"P-CANCEL-9-{w}")
async def test_p_cancel_9_abort_after_final_materialization_changes_nothing(where: str) -> None:
    reg = ToolRegistry()
    caller = AbortController()

    def finalize(execution: Any, result: Any) -> None:
        if where == "finalize":
            caller.abort("user")

    observed: list[Any] = []

    def observe(execution: Any, result: Any) -> None:
        if where == "observer":
            caller.abort("user")
        observed.append(result)

    reg.register(h.make_tool(finalize_content=finalize))
    reg.on_result(observe)
    result = await reg.execute(call(arguments={"text": "ok"}, signal=caller.signal))
    assert caller.signal.aborted
    assert not result.is_error
    assert result.content == [text_block("ok")]
    assert observed[0] is result


async def test_p_cancel_10_started_work_completes_before_the_result() -> None:
    reg = ToolRegistry()
    caller = AbortController()
    started, release = asyncio.Event(), Gate()
    finished: list[str] = []

    async def body(args: Any, ctx: Any) -> str:
        started.set()
        await release.wait()  # ignores the signal
        finished.append("body")
        return "late"

    reg.register(h.make_tool("echo", body))
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    caller.abort("user")
    await yield_turns()
    assert not task.done()
    release.open()
    result = await task
    assert finished == ["body"]
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)
