"""P-RES: the result observers (``on_result``) and frozen final snapshots.

Python mapping: sync observers run inline before ``execute()`` returns; async
observers are scheduled as tasks and never awaited on the commit path; failures of either
are logged on logger ``"toolray"`` as ``tool "<name>" (<callId>): tools/result observer
failed: <msg>``. "The dispatch mode is ``emit``" (P-RES-3) becomes "return values are
ignored and async observers do not delay the result".
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

from toolray import (
    Deny,
    FrozenDict,
    FrozenList,
    ToolBatchInput,
    ToolCall,
    ToolExecutionFailure,
    ToolOutput,
    ToolRegistry,
    text_block,
)
from toolray.testing import Gate

from ._pipeline_helpers import Probe, aborted_signal, call, make_tool, msg, yield_turns

OBSERVER_FAILED = 'tool "echo" (c1): tools/result observer failed: '


async def test_p_res_1_emitted_once_after_finalize_before_execute_returns() -> None:
    reg = ToolRegistry()
    trace: list[str] = []

    def finalize(execution: Any, result: Any) -> None:
        trace.append("finalize")

    reg.register(make_tool(finalize_content=finalize))
    reg.on_result(lambda execution, result: trace.append("observer"))
    for signal in (None, aborted_signal()):
        trace.clear()
        await reg.execute(call(signal=signal))
        assert trace == ["finalize", "observer"]


async def test_p_res_1_never_emitted_for_a_synthetic_skipped_call(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    out = await reg.execute_batch(ToolBatchInput([ToolCall("c1", "echo", "{}")], aborted_signal()))
    assert len(out.results) == 1
    assert probe.counts["result"] == 0


async def test_p_res_2_observers_get_the_frozen_execution_and_the_returned_result(
    reg: ToolRegistry, probe: Probe
) -> None:

    async def body(args: Any, ctx: Any) -> Any:
        return "v"

    probe.register("echo", body)
    result = await reg.execute(call(arguments={"text": "x", "nested": ["a"]}))
    observed_exec, observed = probe.seen["result"][0], probe.results[0]
    assert observed is result
    with pytest.raises(AttributeError):
        observed_exec.signal = aborted_signal()
    assert type(observed_exec.arguments) is FrozenDict
    with pytest.raises(TypeError):
        observed_exec.arguments["nested"].append("b")
    with pytest.raises(dataclasses.FrozenInstanceError):
        observed.content = []  # type: ignore[misc]
    assert type(observed.content) is FrozenList
    with pytest.raises(TypeError):
        observed.content.append(text_block("x"))
    with pytest.raises(TypeError):
        observed.content[0]["text"] = "changed"


async def test_p_res_3_return_values_ignored_and_async_observers_not_awaited() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    entered, release, finished = asyncio.Event(), Gate(), asyncio.Event()

    async def slow(execution: Any, result: Any) -> None:
        entered.set()
        await release.wait()
        finished.set()

    reg.on_result(lambda execution, result: "ignored return value")
    reg.on_result(slow)
    result = await reg.execute(call(arguments={"text": "x"}))
    assert result.content == [text_block("x")]
    assert not finished.is_set()  # execute() resolved while the observer was pending
    await entered.wait()
    release.open()
    await finished.wait()


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("cannot print")


async def test_p_res_4_observer_failures_are_contained_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    seen: list[str] = []
    done = asyncio.Event()

    def sync_fail(execution: Any, result: Any) -> None:
        raise RuntimeError("sync observer broke")

    def unprintable(execution: Any, result: Any) -> None:
        raise _Unprintable

    async def async_fail(execution: Any, result: Any) -> None:
        done.set()
        raise RuntimeError("async observer broke")

    reg.on_result(sync_fail)
    reg.on_result(lambda execution, result: seen.append("first"))
    reg.on_result(unprintable)
    reg.on_result(async_fail)
    reg.on_result(lambda execution, result: seen.append("second"))
    with caplog.at_level(logging.WARNING, logger="toolray"):
        result = await reg.execute(call(arguments={"text": "x"}))
        await done.wait()
        await yield_turns()  # the failed task's done-callback logs on a later loop turn
    assert result.content == [text_block("x")]
    assert not result.is_error
    assert seen == ["first", "second"]
    messages = [r.getMessage() for r in caplog.records if r.name == "toolray"]
    assert messages == [
        OBSERVER_FAILED + "sync observer broke",
        OBSERVER_FAILED + "<unprintable thrown value>",
        OBSERVER_FAILED + "async observer broke",
    ]
    assert all(r.levelno == logging.WARNING for r in caplog.records if r.name == "toolray")


async def test_p_res_5_scoped_observer_sees_only_its_agent_including_denials() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    scoped: list[Any] = []
    global_: list[Any] = []
    reg.scope("a").on_result(lambda execution, result: scoped.append((execution.scope, result)))
    reg.on_result(lambda execution, result: global_.append(execution.scope))

    async def deny_second(execution: Any, next_: Any) -> Any:
        if execution.call_id == "c2":
            return Deny("denied")
        return await next_()

    reg.on_pre_execute(deny_second)
    reg.scope("b")
    await reg.execute(call(scope="a", call_id="c1"))
    await reg.execute(call(scope="a", call_id="c2"))
    await reg.execute(call(scope="b", call_id="c3"))
    await reg.execute(call(call_id="c4"))
    assert [s for s, _ in scoped] == ["a", "a"]
    assert [r.is_error for _, r in scoped] == [False, True]
    assert global_ == ["a", "a", "b", None]


async def test_p_res_6_observer_registry_changes_apply_to_later_calls() -> None:
    reg = ToolRegistry()

    async def v1(args: Any, ctx: Any) -> str:
        return "v1"

    async def v2(args: Any, ctx: Any) -> str:
        return "v2"

    dispose = reg.register(make_tool("echo", v1))

    def swap(execution: Any, result: Any) -> None:
        if execution.call_id == "c1":
            dispose()
            reg.register(make_tool("echo", v2))

    reg.on_result(swap)
    first = await reg.execute(call(call_id="c1"))
    second = await reg.execute(call(call_id="c2"))
    assert (first.value, second.value) == ("v1", "v2")  # type: ignore[union-attr]


async def test_p_res_7_every_field_frozen_and_value_not_copied_again(
    reg: ToolRegistry, probe: Probe
) -> None:
    out = ToolOutput(
        schema={"type": "json"},
        render=lambda a, v: [text_block("r")],
        presentation_meta=lambda a, v: {"m": [1]},
    )

    async def body(args: Any, ctx: Any) -> Any:
        ctx.defer_context(msg("deferred"))
        return {"items": [1, 2]}

    probe.register("echo", body, output=out)
    result = await reg.execute(call())
    assert result.value is probe.post_results[0].value  # type: ignore[union-attr]
    assert type(result.value) is FrozenDict  # type: ignore[union-attr]
    assert type(result.meta) is FrozenDict
    assert type(result.meta["m"]) is FrozenList
    assert isinstance(result.additional_contexts, tuple)
    context = result.additional_contexts[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.content = []  # type: ignore[misc]
    with pytest.raises(TypeError):
        context.content.append(text_block("x"))

    reg.guard(lambda execution: "denied")
    denied = await reg.execute(call())
    assert isinstance(denied, ToolExecutionFailure)
    with pytest.raises(dataclasses.FrozenInstanceError):
        denied.error.message = "changed"  # type: ignore[misc]
    assert type(denied.content) is FrozenList


async def test_p_res_5_ancestor_scope_observer_does_not_see_descendant_results() -> None:
    reg = ToolRegistry()
    reg.register(make_tool())
    seen: list[Any] = []
    reg.scope("root").on_result(lambda execution, result: seen.append(execution.scope))
    reg.scope("child", parent="root")
    await reg.execute(call(scope="child"))
    await reg.execute(call(scope="root"))
    assert seen == ["root"]
