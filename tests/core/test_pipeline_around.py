"""P-AROUND: the ``on_execute`` waterfall, signal replacement and re-fusion.

Python mapping: a wrapper replaces the signal by assignment (``execution.signal = s``,
P-AROUND-12) and restores it the same way. "Successes are deep-frozen" means assignment to a
result field raises and ``content``/``value`` containers raise ``TypeError`` on mutation.

P-AROUND-17 (calling ``next()`` twice) asks the port to pick a rule; toolray does not pin
one. The test below pins only what upstream and any reasonable rule share: with one
wrapper, a second ``next()`` runs the body again and its result is accepted as this
dispatch's own.

P-AROUND-14, "if both were already aborted when fused, the wrapper's reason wins": not
observable — with both sources aborted the pre-body check (P-AROUND-15) skips the body, and
the fused reason appears in no result; the "first to abort" half is tested.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import weakref
from typing import Any

import pytest

from toolray import (
    AbortController,
    HarnessError,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    text_block,
)
from toolray.testing import Gate

from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    ABORTED_INFO,
    ABORTED_MSG,
    Probe,
    aborted_signal,
    assert_failure,
    call,
    error_wire,
    make_tool,
    msg,
    replacing,
    stage_counts,
    texts,
)


async def test_p_around_1_runs_after_allow_and_around_the_body() -> None:
    reg = ToolRegistry()
    trace: list[str] = []

    async def pre(execution: Any, next_: Any) -> Any:
        trace.append("pre")
        return await next_()

    async def around(execution: Any, next_: Any) -> Any:
        trace.append("execute:before")
        result = await next_()
        trace.append("execute:after")
        return result

    async def body(args: Any, ctx: Any) -> str:
        trace.append("dispatch")
        return "ok"

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        trace.append("post")
        return await next_()

    reg.on_pre_execute(pre)
    reg.on_execute(around)
    reg.on_post_execute(post)
    reg.register(make_tool("echo", body))
    await reg.execute(call())
    assert trace == ["pre", "execute:before", "dispatch", "execute:after", "post"]


async def test_p_around_2_3_body_throw_reaches_the_wrapper_normalized_and_post_runs(
    reg: ToolRegistry, probe: Probe
) -> None:
    seen: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        raise HarnessError("kaboom", "BOOM")

    async def around(execution: Any, next_: Any) -> Any:
        result = await next_()  # never raises
        seen.append(result)
        return result

    reg.on_execute(around)
    probe.register("echo", body)
    result = await reg.execute(call())
    assert isinstance(seen[0], ToolExecutionFailure)
    assert seen[0].error == ToolFailure("kaboom", ToolErrorInfo("HarnessError", "BOOM"))
    assert result.to_wire() == error_wire("kaboom", ("HarnessError", "BOOM"))
    assert probe.counts["post"] == 1


async def test_p_around_4_10_short_circuit_is_re_rendered_and_keeps_contexts(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    authored = ToolExecutionSuccess(
        "short-circuited",
        [text_block("ignored authored content")],
        additional_contexts=(msg("around"),),
    )
    reg.on_execute(lambda execution, next_: authored)
    result = await reg.execute(call())
    assert probe.counts["body"] == 0
    assert isinstance(result, ToolExecutionSuccess)
    assert result.value == "short-circuited"
    assert result.content == [text_block("short-circuited")]
    assert texts(result.additional_contexts) == ["around"]
    assert result.additional_contexts[0].source == "test"


async def test_p_around_5_foreign_result_violating_the_schema_is_invalid_output(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    cached = ToolExecutionSuccess({"not": "a string"}, [text_block("cached")])
    reg.on_execute(lambda execution, next_: cached)
    result = await reg.execute(call())
    assert result.is_error
    assert result.error.info == ToolErrorInfo("ToolOutputError", "INVALID_TOOL_OUTPUT")  # type: ignore[union-attr]
    assert probe.counts["body"] == 0
    assert probe.counts["post"] == 0


async def test_p_around_6_canonical_result_passes_through_a_copy_is_re_normalized() -> None:
    renders: list[Any] = []
    metas: list[Any] = []

    def render(args: Any, value: Any) -> list[Any]:
        renders.append(value)
        return [text_block(f"render:{value}")]

    def meta(args: Any, value: Any) -> Any:
        metas.append(value)
        return {"projected": value}

    output = ToolOutput(schema={"type": "string"}, render=render, presentation_meta=meta)

    async def passthrough(execution: Any, next_: Any) -> Any:
        return await next_()

    reg = ToolRegistry()
    probe = Probe(reg)
    probe.register(output=output)
    reg.on_execute(passthrough)
    same = await reg.execute(call(arguments={"text": "v"}))
    assert same.content == [text_block("render:v")]
    assert (len(renders), len(metas)) == (1, 1)

    async def copy(execution: Any, next_: Any) -> Any:
        result = await next_()
        return dataclasses.replace(
            result,
            content=[text_block("edited")],
            additional_contexts=(*result.additional_contexts, msg("wrapper")),
        )

    renders.clear()
    metas.clear()
    reg.on_execute(copy)
    copied = await reg.execute(call(arguments={"text": "v"}))
    assert copied.content == [text_block("render:v")]  # content edits in the copy are lost
    assert copied.meta == {"projected": "v"}
    assert texts(copied.additional_contexts) == ["wrapper"]
    assert (len(renders), len(metas)) == (2, 2)


async def test_p_around_7_wrapper_authored_failure_is_kept_verbatim(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    authored = ToolExecutionFailure(
        error=ToolFailure("wrapper denied", ToolErrorInfo("PolicyError", "WRAPPED")),
        content=[text_block("custom text")],
        meta={"k": "v"},
        additional_contexts=(msg("wrapper-ctx"),),
    )
    reg.on_execute(lambda execution, next_: authored)
    result = await reg.execute(call())
    assert result == authored
    assert result.to_wire() == {
        "isError": True,
        "content": [text_block("custom text")],
        "error": {"message": "wrapper denied", "info": {"name": "PolicyError", "code": "WRAPPED"}},
        "meta": {"k": "v"},
    }
    assert probe.counts["post"] == 1


async def test_p_around_8_wrapper_success_after_the_tool_disappeared_is_unknown_tool(
    reg: ToolRegistry, probe: Probe
) -> None:
    dispose = probe.register()

    async def vanish(execution: Any, next_: Any) -> Any:
        dispose()
        return ToolExecutionSuccess("v", [text_block("v")])

    reg.on_execute(vanish)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(
        'unknown tool "echo"', ("ToolNotFoundError", "UNKNOWN_TOOL")
    )
    assert probe.counts["post"] == 0


async def test_p_around_9_throwing_wrapper_skips_post_and_drops_deferred_contexts(
    reg: ToolRegistry, probe: Probe
) -> None:

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("deferred"))
        return "ok"

    async def broken(execution: Any, next_: Any) -> Any:
        await next_()
        raise RuntimeError("wrapper broke")

    reg.on_execute(broken)
    probe.register("echo", body)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("wrapper broke")
    assert result.additional_contexts == ()
    assert probe.counts["body"] == 1
    assert probe.counts["post"] == 0


async def test_p_around_11_registry_successes_are_frozen_before_around_and_post() -> None:
    reg = ToolRegistry()
    checked: list[str] = []

    def check(result: Any, where: str) -> None:
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.value = {"items": ["changed"]}
        with pytest.raises(TypeError):
            result.value["items"].append("changed")
        with pytest.raises(TypeError):
            result.content.append(text_block("changed"))
        checked.append(where)

    async def around(execution: Any, next_: Any) -> Any:
        result = await next_()
        check(result, "around")
        return result

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        check(result, "post")
        return await next_()

    async def body(args: Any, ctx: Any) -> Any:
        return {"items": ["a"]}

    out = ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block("r")])
    reg.on_execute(around)
    reg.on_post_execute(post)
    reg.register(make_tool("echo", body, output=out))
    result = await reg.execute(call())
    assert checked == ["around", "post"]
    assert result.value == {"items": ["a"]}


async def test_p_around_12_replacement_is_re_fused_with_the_caller_signal() -> None:
    reg = ToolRegistry()
    caller, replacement_ctrl = AbortController(), AbortController()
    seen: dict[str, Any] = {}
    started, release = asyncio.Event(), Gate()

    async def body(args: Any, ctx: Any) -> str:
        seen["body"] = ctx.signal
        started.set()
        await release.wait()
        return "ok"

    reg.on_execute(replacing(lambda: replacement_ctrl.signal))
    reg.register(make_tool("echo", body))
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    body_signal = seen["body"]
    assert body_signal is not caller.signal
    assert body_signal is not replacement_ctrl.signal
    assert not body_signal.aborted
    caller.abort("user")
    assert body_signal.aborted
    assert not replacement_ctrl.signal.aborted
    release.open()
    await task


async def test_p_around_13_body_gets_the_caller_signal_when_nothing_replaced_it(
    reg: ToolRegistry, probe: Probe
) -> None:
    signals: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        signals.append(ctx.signal)
        return "ok"

    probe.register("echo", body)
    inp = call()
    await reg.execute(inp)
    assert signals[0] is inp.signal


@pytest.mark.parametrize(
    "order", ["wrapper-first", "caller-first"], ids=lambda o: f"P-AROUND-14-{o}"
)
async def test_p_around_14_fused_reason_is_the_first_to_abort(order: str) -> None:
    reg = ToolRegistry()
    caller, wrapper_ctrl = AbortController(), AbortController()
    reasons: list[Any] = []
    started, release = asyncio.Event(), Gate()

    async def body(args: Any, ctx: Any) -> str:
        started.set()
        await release.wait()
        reasons.append(ctx.signal.reason)
        return "ok"

    reg.on_execute(replacing(lambda: wrapper_ctrl.signal))
    reg.register(make_tool("echo", body))
    task = asyncio.ensure_future(reg.execute(call(signal=caller.signal)))
    await started.wait()
    if order == "wrapper-first":
        wrapper_ctrl.abort("wrapper reason")
        caller.abort("caller reason")
    else:
        caller.abort("caller reason")
        wrapper_ctrl.abort("wrapper reason")
    release.open()
    await task
    assert reasons == [f"{order.split('-')[0]} reason"]


async def test_p_around_14_fusion_listeners_are_released_after_the_body() -> None:
    reg = ToolRegistry()
    caller = AbortController()
    fused: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        fused.append(weakref.ref(ctx.signal))
        return "ok"

    reg.on_execute(replacing(lambda: AbortController().signal))
    reg.register(make_tool("echo", body))
    await reg.execute(call(signal=caller.signal))
    gc.collect()
    assert fused[0]() is None  # the live caller signal holds no listener onto the fused one


@pytest.mark.parametrize("name", ["echo", "nope"], ids=["P-AROUND-15-known", "P-AROUND-15-unknown"])
async def test_p_around_15_aborted_wrapper_signal_skips_the_body(
    reg: ToolRegistry, probe: Probe, name: str
) -> None:
    probe.register()

    async def aborted(execution: Any, next_: Any) -> Any:
        execution.signal = aborted_signal("deadline")
        return await next_()

    reg.on_execute(aborted)
    result = await reg.execute(call(name))
    assert result.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0
    assert probe.counts["post"] == 1


async def test_p_around_15_caller_abort_while_wrapper_waits_before_next(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    caller = AbortController()

    async def slow(execution: Any, next_: Any) -> Any:
        caller.abort("user")  # arrives while the wrapper has not delegated yet
        return await next_()

    reg.on_execute(slow)
    result = await reg.execute(call(signal=caller.signal))
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0


async def test_p_around_16_signal_restoration() -> None:
    reg = ToolRegistry()
    caller = AbortController()
    replacement = AbortController().signal
    seen: dict[str, Any] = {}

    async def restoring(execution: Any, next_: Any) -> Any:
        previous = execution.signal
        execution.signal = replacement
        try:
            result = await next_()
            seen["after-next"] = execution.signal
            return result
        finally:
            execution.signal = previous

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        seen["post"] = execution.signal
        return await next_()

    reg.on_execute(restoring)
    reg.on_post_execute(post)
    reg.register(make_tool())
    await reg.execute(call(signal=caller.signal))
    assert seen["after-next"] is replacement
    assert seen["post"] is caller.signal


async def test_p_around_16_non_restoring_wrapper_leaves_its_signal_classification_uses_caller() -> (
    None
):
    reg = ToolRegistry()
    caller = AbortController()
    replacement = AbortController().signal
    seen: dict[str, Any] = {}

    async def leaky(execution: Any, next_: Any) -> Any:
        execution.signal = replacement
        return await next_()

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        seen["post"] = execution.signal
        caller.abort("user")  # the caller, not the signal post-execute sees
        return await next_()

    reg.on_execute(leaky)
    reg.on_post_execute(post)
    reg.on_result(lambda execution, result: seen.setdefault("result", execution.signal))
    reg.register(make_tool())
    result = await reg.execute(call(signal=caller.signal))
    assert seen["post"] is replacement
    assert seen["result"] is replacement
    assert not replacement.aborted
    assert_failure(result, ABORTED_MSG, ABORTED_INFO)


async def test_p_around_17_second_next_runs_the_body_again() -> None:
    reg = ToolRegistry()
    probe = Probe(ToolRegistry())
    values: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        return f"run-{probe.counts['body']}"

    async def retry(execution: Any, next_: Any) -> Any:
        values.append((await next_()).value)
        second = await next_()
        values.append(second.value)
        return second

    reg.on_execute(retry)
    reg.register(probe.tool("echo", body))
    result = await reg.execute(call())
    assert probe.counts["body"] == 2
    assert values == ["run-1", "run-2"]
    assert result.content == [text_block("run-2")]


async def test_p_around_18_the_same_wrapper_runs_for_concurrent_executions(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    active, peak = [0], [0]
    both_in, release = asyncio.Event(), Gate()

    async def reentrant(execution: Any, next_: Any) -> Any:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        if active[0] == 2:
            both_in.set()
        await release.wait()
        try:
            return await next_()
        finally:
            active[0] -= 1

    reg.on_execute(reentrant)
    tasks = [
        asyncio.ensure_future(reg.execute(call(arguments={"text": k}, call_id=k)))
        for k in ("a", "b")
    ]
    await both_in.wait()
    release.open()
    results = await asyncio.gather(*tasks)
    assert peak[0] == 2
    assert [r.content for r in results] == [[text_block("a")], [text_block("b")]]
    assert probe.stages() == stage_counts(
        pre=2, guard=2, around=2, body=2, post=2, finalize=2, result=2
    )
