"""P-TIME: ``TimeoutPolicy``.

Time is virtual: ``FakeClock`` is passed to ``TimeoutPolicy(clock=…)`` (or to
``ToolRegistry(clock=…)``); with ``autojump=True`` it jumps to the next deadline whenever
every task waits, so a "100 ms" timeout takes no real time. Bodies are async (a sync body
in a thread would look idle to the autojump).

Entries without a direct Python meaning:

- P-TIME-14 (``timeout_ms`` above 2147483647 passes registration but makes ``deadline()``
  throw at dispatch): a Node ``setTimeout`` limit. Python timers have no such limit and
  toolray keeps only the "positive finite" rule, so the analog test checks that a large
  budget registers and runs normally.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from typing import Any

import pytest

from toolray import (
    AbortController,
    HarnessError,
    TimeoutPolicy,
    TimeoutReason,
    ToolRegistry,
    text_block,
)
from toolray.testing import FakeClock, Gate

from ._pipeline_helpers import (
    ABORTED_INFO,
    ABORTED_MSG,
    Probe,
    assert_failure,
    call,
    error_wire,
    make_tool,
    msg,
    stage_counts,
    texts,
    yield_turns,
)

TIMEOUT_INFO = ("ToolTimeoutError", "TOOL_TIMEOUT")


def _setup(
    body: Any = None, *, timeout_ms: Any = 100, autojump: bool = True, probe: bool = False
) -> tuple[ToolRegistry, FakeClock, Any]:
    clock = FakeClock(autojump=autojump)
    reg = ToolRegistry(clock=clock)
    recorder = Probe(reg) if probe else None
    definition = (
        recorder.tool("echo", body, timeout_ms=timeout_ms)
        if recorder is not None
        else make_tool("echo", body, timeout_ms=timeout_ms)
    )
    reg.register(definition)
    TimeoutPolicy(clock=clock).install(reg)
    return reg, clock, recorder


async def _cooperative(args: Any, ctx: Any) -> str:
    await ctx.signal.wait()
    return "stopped"


async def test_p_time_1_no_budget_delegates_without_touching_the_signal() -> None:
    signals: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        signals.append(ctx.signal)
        return "ok"

    reg, _, _ = _setup(body, timeout_ms=None)
    inp = call()
    result = await reg.execute(inp)
    assert not result.is_error
    assert signals == [inp.signal]
    unknown = await reg.execute(call("nope"))
    assert unknown.error.info.code == "UNKNOWN_TOOL"  # type: ignore[union-attr]


async def test_p_time_2_budgeted_body_gets_a_derived_signal_post_gets_the_caller() -> None:
    seen: dict[str, Any] = {}

    async def body(args: Any, ctx: Any) -> str:
        seen["body"] = ctx.signal
        return "ok"

    reg, _, _ = _setup(body)

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        seen["post"] = execution.signal
        return await next_()

    reg.on_post_execute(post)
    inp = call()
    await reg.execute(inp)
    assert seen["body"] is not inp.signal
    assert seen["post"] is inp.signal


async def test_p_time_3_fast_budgeted_tool_keeps_its_own_result() -> None:
    reg, _, _ = _setup()
    result = await reg.execute(call(arguments={"text": "ok"}))
    assert result.to_wire() == {"isError": False, "content": [text_block("ok")]}
    assert result.value == "ok"  # type: ignore[union-attr]


@pytest.mark.parametrize("budget", [100, 100.0], ids=["P-TIME-4-int", "P-TIME-4-float"])
async def test_p_time_4_deadline_replaces_a_cooperative_result(budget: float) -> None:
    reg, clock, _ = _setup(_cooperative, timeout_ms=budget)
    started = time.monotonic()
    result = await reg.execute(call())
    elapsed = time.monotonic() - started
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)
    assert clock.now() == pytest.approx(0.1)
    assert elapsed < 0.1  # virtual time: no real 100 ms wait


async def test_p_time_4_fractional_budget_prints_like_the_original() -> None:
    reg, _, _ = _setup(_cooperative, timeout_ms=0.5)
    result = await reg.execute(call())
    assert result.error.message == "tool call timed out after 0.5ms"  # type: ignore[union-attr]


async def test_p_time_4_manual_advance_past_the_deadline() -> None:
    reg, clock, _ = _setup(_cooperative, autojump=False)
    task = asyncio.ensure_future(reg.execute(call()))
    await yield_turns()
    assert not task.done()
    clock.advance(0.15)
    result = await task
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)


async def test_p_time_5_provider_abort_error_is_replaced_with_timeout() -> None:
    async def body(args: Any, ctx: Any) -> str:
        await ctx.signal.wait()
        raise HarnessError("web fetch aborted", "WEB_ABORTED")

    reg, _, _ = _setup(body)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)


async def test_p_time_6_caller_abort_before_the_deadline_is_aborted() -> None:
    started = asyncio.Event()

    async def body(args: Any, ctx: Any) -> str:
        started.set()
        await ctx.signal.wait()
        return "stopped"

    reg, clock, _ = _setup(body, autojump=False)
    caller = AbortController()
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    clock.advance(0.05)
    caller.abort("user")
    result = await task
    assert result.to_wire() == error_wire(ABORTED_MSG, ABORTED_INFO)


async def test_p_time_7_deadline_first_then_caller_abort_is_timeout() -> None:
    noticed, cleanup = asyncio.Event(), Gate()

    async def body(args: Any, ctx: Any) -> str:
        await ctx.signal.wait()
        noticed.set()
        await cleanup.wait()  # still cleaning up when the caller aborts
        return "stopped"

    reg, clock, _ = _setup(body, autojump=False)
    caller = AbortController()
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await yield_turns()
    clock.advance(0.1)
    await noticed.wait()
    caller.abort("user")
    cleanup.open()
    result = await task
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)


async def test_p_time_8_a_foreign_deadline_reason_reads_as_a_cancel() -> None:
    started = asyncio.Event()

    async def body(args: Any, ctx: Any) -> str:
        started.set()
        await ctx.signal.wait()
        return "stopped"

    reg, _, _ = _setup(body, timeout_ms=10_000)
    caller = AbortController()
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    caller.abort(TimeoutReason(ms=5, code="STEP_TIMEOUT"))  # an outer, different deadline
    result = await task
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)


async def test_p_time_9_uncooperative_body_keeps_the_call_pending_past_its_budget() -> None:
    release = Gate()
    body_signals: list[Any] = []
    started = asyncio.Event()

    async def body(args: Any, ctx: Any) -> str:
        body_signals.append(ctx.signal)
        started.set()
        await release.wait()  # ignores the signal
        return "late"

    reg, clock, _ = _setup(body)
    task = asyncio.ensure_future(reg.execute(call()))
    await started.wait()
    await body_signals[0].wait()  # the deadline fired (virtual time jumped)
    assert clock.now() >= 0.1
    await yield_turns()
    assert not task.done()
    release.open()
    result = await task
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)


async def test_p_time_10_timeout_passes_through_post_execute_and_finalize() -> None:
    reg, _, probe = _setup(_cooperative, probe=True)
    result = await reg.execute(call())
    assert probe.stages() == stage_counts(
        pre=1, guard=1, around=1, body=1, post=1, finalize=1, result=1
    )
    assert probe.post_results[0].error.info.code == "TOOL_TIMEOUT"
    assert result.error.info.code == "TOOL_TIMEOUT"  # type: ignore[union-attr]


async def test_p_time_11_inner_wrapper_delay_past_the_deadline_is_timeout() -> None:
    reg, clock, _ = _setup()
    bodies: list[Any] = []

    async def slow_inner(execution: Any, next_: Any) -> Any:
        result = await next_()
        bodies.append(result)
        await clock.sleep(0.2)  # delays next() of the policy past its deadline
        return result

    reg.on_execute(slow_inner)  # registered after the policy: inner
    result = await reg.execute(call(arguments={"text": "ok"}))
    assert not bodies[0].is_error  # the body itself succeeded in time
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)


async def test_p_time_12_window_excludes_pre_and_post_execute() -> None:
    reg, clock, _ = _setup()

    async def slow_pre(execution: Any, next_: Any) -> Any:
        await clock.sleep(0.5)
        return await next_()

    async def slow_post(execution: Any, result: Any, next_: Any) -> Any:
        await clock.sleep(0.5)
        return await next_()

    reg.on_pre_execute(slow_pre)
    reg.on_post_execute(slow_post)
    result = await reg.execute(call(arguments={"text": "ok"}))
    assert result.content == [text_block("ok")]
    assert clock.now() == pytest.approx(1.0)


async def test_p_time_12_window_covers_inner_wrappers_and_the_body() -> None:
    reg, clock, _ = _setup()

    async def slow_inner(execution: Any, next_: Any) -> Any:
        await clock.sleep(0.06)
        return await next_()

    async def body(args: Any, ctx: Any) -> str:
        await clock.sleep(0.06)  # 60 ms + 60 ms > 100 ms budget
        ctx.defer_context(msg("kept"))
        return "ok"

    reg.register(make_tool("slow", body, timeout_ms=100))
    reg.on_execute(slow_inner)  # after the policy: inside its window
    result = await reg.execute(call("slow"))
    assert result.to_wire() == error_wire("tool call timed out after 100ms", TIMEOUT_INFO)
    assert texts(result.additional_contexts) == ["kept"]


@pytest.mark.parametrize(
    "budget", [0, -1, math.inf, -math.inf, math.nan], ids=lambda b: f"P-TIME-13-{b}"
)
def test_p_time_13_budget_must_be_positive_finite(budget: float) -> None:
    with pytest.raises((TypeError, ValueError)) as defined:
        make_tool("bad", timeout_ms=budget)
    assert str(defined.value) == "define_tool(bad): timeout_ms must be a positive finite number"
    definition = dataclasses.replace(make_tool("bad"), timeout_ms=budget)
    with pytest.raises((TypeError, ValueError)) as registered:
        ToolRegistry().register(definition)
    assert str(registered.value) == 'tool "bad" timeout_ms must be a positive finite number'


def test_p_time_13_budget_never_reaches_schemas() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("budgeted", timeout_ms=100))
    [schema] = reg.schemas()
    assert set(schema) == {"name", "description", "parameters"}
    assert "timeout" not in repr(schema).lower()


async def test_p_time_14_large_budget_registers_and_runs() -> None:
    reg, _, _ = _setup(timeout_ms=3_000_000_000)
    result = await reg.execute(call(arguments={"text": "ok"}))
    assert result.content == [text_block("ok")]


async def test_p_time_15_timer_cleared_and_plugin_disposable() -> None:
    clock = FakeClock(autojump=False)
    reg = ToolRegistry(clock=clock)
    signals: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        signals.append(ctx.signal)
        return "ok"

    reg.register(make_tool("echo", body, timeout_ms=100))
    dispose = TimeoutPolicy(clock=clock).install(reg)
    inp = call()
    first = await reg.execute(inp)
    assert not first.is_error
    await yield_turns()
    timers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert timers == []  # the deadline timer was cancelled when next() settled
    clock.advance(1.0)  # far past the deadline
    await yield_turns()
    assert not signals[0].aborted
    dispose()
    second_input = call()
    await reg.execute(second_input)
    assert signals[1] is second_input.signal
