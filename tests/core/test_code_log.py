"""C-CODE-9/10/11 and the runner and trace of sub-calls: the ptc log records, the
``on_dispatch_log`` waterfall, lossless-JSON binding arguments.

The program is played by ``FakeRuntime.behavior``, as in ``test_code_bridge.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from toolray import (
    AbortController,
    AbortSignal,
    BatchExecutor,
    PtcDispatchLog,
    ToolBatchInput,
    ToolCall,
    text_block,
)
from toolray.code import CodeRunOutcome
from toolray.lowlevel import run_body_inline

from ._code_helpers import (
    caught,
    code_registry,
    events,
    log_step,
    outcome,
    register_echo,
    run_code,
    text,
)

pytestmark = pytest.mark.asyncio


# ---------------------------------------------------------------- C-CODE-9
async def test_c_code_9_one_start_and_one_settle_record_per_dispatch() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    log = log_step()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        first = await bindings["echo"]({"value": "one"})
        second = await bindings["echo"]({"value": "two"})
        return CodeRunOutcome(logs=[f"saw {first}"], result=second, has_result=True)

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert result.value == {"logs": ["saw echo:one"], "result": "echo:two"}
    assert text(result) == "saw echo:one\necho:two"
    assert result.meta is None
    assert calls == [{"value": "one"}, {"value": "two"}]
    head = {"turn": 1, "step": 2, "rootCallId": "call-1", "parentCallId": "call-1"}
    expected = []
    for n, value in ((1, "one"), (2, "two")):
        ident = {**head, "subCallId": f"call-1:ptc:{n}", "name": "echo"}
        args = {"arguments": {"value": value}}
        content = [{"type": "text", "text": f"echo:{value}"}]
        expected.append({"type": "tool/ptc-dispatch-start", **ident, **args})
        expected.append(
            {"type": "tool/ptc-dispatch", **ident, **args, "isError": False, "content": content}
        )
    assert events(log) == expected
    for event in events(log):
        assert type(event["arguments"]) is dict  # plain JSON, ready for any sink


async def test_c_code_9_the_start_record_precedes_prepare() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    log = log_step()
    seen_at_pre: list[list[str]] = []

    def pre(execution: Any, next: Any) -> Any:
        if execution.name == "echo":
            seen_at_pre.append([e["type"] for e in events(log)])
        return next()

    reg.on_pre_execute(pre)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "x"})
        return outcome()

    fake.behavior = program
    await run_code(reg, log=log)
    assert seen_at_pre == [["tool/ptc-dispatch-start"]]


async def test_c_code_9_the_logged_arguments_are_a_separate_copy() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    log = log_step()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        args = {"value": "x"}
        await bindings["echo"](args)
        args["value"] = "mutated after the call"
        return outcome()

    fake.behavior = program
    await run_code(reg, log=log)
    start, settle = events(log)
    assert start["arguments"] == settle["arguments"] == {"value": "x"}
    assert start["arguments"] is not settle["arguments"]


async def test_c_code_9_without_a_log_step_dispatch_still_works() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await bindings["echo"]({"value": "x"}))

    fake.behavior = program
    assert text(await run_code(reg, log=None)) == "echo:x"
    assert calls == [{"value": "x"}]


# ---------------------------------------------------------------- C-CODE-10
async def test_c_code_10_dispatch_log_replaces_only_the_logged_content() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    log = log_step()
    seen: list[PtcDispatchLog] = []

    async def shape(dispatch: PtcDispatchLog, next: Any) -> Any:
        seen.append(dispatch)
        original = await next()
        return [text_block(f"preview of {original[0]['text']}")]

    reg.scope("agent").on_dispatch_log(shape)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await bindings["echo"]({"value": "x"}))

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert text(result) == "echo:x"
    assert events(log, "tool/ptc-dispatch")[0]["content"] == [
        {"type": "text", "text": "preview of echo:x"}
    ]
    (dispatch,) = seen
    assert (dispatch.sub_call_id, dispatch.name, dispatch.is_error) == (
        "call-1:ptc:1",
        "echo",
        False,
    )
    assert dispatch.scope == "agent"
    assert dispatch.execution.name == "run_code"
    assert dispatch.content == [{"type": "text", "text": "echo:x"}]


async def test_c_code_10_a_scoped_dispatch_log_listener_sees_only_its_scope() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    seen: list[str | None] = []

    def shape(dispatch: PtcDispatchLog, next: Any) -> Any:
        seen.append(dispatch.scope)
        return next()

    reg.scope("other").on_dispatch_log(shape)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "x"})
        return outcome()

    fake.behavior = program
    await run_code(reg, scope="agent", log=log_step())
    await run_code(reg, scope="other", log=log_step())
    assert seen == ["other"]


@pytest.mark.parametrize("bad", ["raise", "not a list", "not json"])
async def test_c_code_10_a_failing_listener_is_contained(
    bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    reg, fake = code_registry()
    register_echo(reg)
    log = log_step()

    def shape(dispatch: PtcDispatchLog, next: Any) -> Any:
        if bad == "raise":
            raise RuntimeError("log-content listener failed")
        return "text" if bad == "not a list" else [{"type": "text", "text": {1, 2}}]

    reg.on_dispatch_log(shape)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await bindings["echo"]({"value": "x"}))

    fake.behavior = program
    with caplog.at_level(logging.WARNING, logger="toolray"):
        result = await run_code(reg, log=log)
    assert text(result) == "echo:x"
    settle = events(log, "tool/ptc-dispatch")[0]
    assert settle["content"] == [{"type": "text", "text": "echo:x"}]
    assert "ptc-dispatch-log listener failed for echo" in caplog.text


async def test_c_code_10_slow_log_work_is_drained_before_run_code_returns() -> None:
    reg, fake = code_registry(max_parallel_sub_calls=1)
    register_echo(reg)
    log = log_step()

    async def shape(dispatch: PtcDispatchLog, next: Any) -> Any:
        for _ in range(5):
            await asyncio.sleep(0)  # yields only: log work that takes several loop turns
        return await next()

    reg.on_dispatch_log(shape)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        for value in "abc":
            await bindings["echo"]({"value": value})
        return outcome()

    fake.behavior = program
    await run_code(reg, log=log)
    settles = events(log, "tool/ptc-dispatch")
    assert sorted(e["subCallId"] for e in settles) == [f"call-1:ptc:{n}" for n in (1, 2, 3)]


# ---------------------------------------------------------------- C-CODE-11
async def test_c_code_11_non_json_arguments_are_rejected_before_dispatch() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    log = log_step()

    class Hostile(dict[str, Any]):
        def items(self) -> Any:
            raise RuntimeError("getter exploded")

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        echo = bindings["echo"]
        return outcome(
            result=[
                await caught(echo(None)),
                await caught(echo({"value": float("nan")})),
                await caught(echo({"value": b"bytes"})),
                await caught(echo({"big": {1, 2}})),
                await caught(echo(Hostile(value="x"))),
            ]
        )

    fake.behavior = program
    messages = (await run_code(reg, log=log)).value["result"]
    assert messages[0] == (
        "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)"
    )
    assert all(m.startswith("tool arguments must be lossless JSON: ") for m in messages[1:])
    assert calls == []
    assert events(log) == []


async def test_c_code_11_arguments_reach_the_tool_frozen() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "x"})
        return outcome()

    fake.behavior = program
    await run_code(reg)
    with pytest.raises(TypeError):
        calls[0]["value"] = "changed"


async def test_sub_call_bodies_run_with_the_runner_running_run_code() -> None:
    """A custom runner (a Ray executor's worker runner, say) also runs the sub-call bodies."""
    reg, fake = code_registry()
    register_echo(reg)
    ran: list[str] = []

    async def runner(call: Any, entry: Any, ctx: Any) -> Any:
        ran.append(ctx.call_id)
        return await run_body_inline(call, entry, ctx)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await bindings["echo"]({"value": "x"}))

    fake.behavior = program
    executor = BatchExecutor(reg, runner=runner)
    args = {"code": "p", "description": "d"}
    batch = ToolBatchInput([ToolCall("c1", "run_code", args)], AbortController().signal)
    result = await executor.execute(batch)
    assert result.results[0].result.value == {"logs": [], "result": "echo:x"}
    assert ran == ["c1", "c1:ptc:1"]


async def test_a_batch_trace_nests_the_sub_call_spans_under_run_code() -> None:
    reg, fake = code_registry()
    register_echo(reg)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "a"})
        await caught(bindings["echo"]({}))
        return outcome()

    fake.behavior = program
    trace: list[dict[str, Any]] = []
    args = {"code": "p", "description": "d"}
    batch = ToolBatchInput([ToolCall("c1", "run_code", args)], AbortController().signal)
    await BatchExecutor(reg).execute(batch, trace=trace)
    (span,) = [e for e in trace if e["type"] == "call"]
    subs = span["subCalls"]
    assert [(s["callId"], s["name"], s["isError"], s["code"]) for s in subs] == [
        ("c1:ptc:1", "echo", False, None),
        ("c1:ptc:2", "echo", True, "INVALID_ARGS"),
    ]
    for sub in subs:  # seconds since the batch started, inside the run_code span
        assert span["started"] <= sub["started"] <= sub["settled"] <= sub["committed"]
        assert sub["committed"] <= span["settled"]
