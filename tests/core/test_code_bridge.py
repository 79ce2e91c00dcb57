"""C-CODE-1/3/4/5/9/10/11: the ``run_code`` bridge — bindings, sub-call identity, the
full pipeline behind each binding, what the program sees, and the ptc log records.

The program is played by ``FakeRuntime.behavior`` (it calls the bindings it is given), so
each contract is checked without a child process; ``tests/code/test_registry_programs.py``
runs the same paths through real programs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from toolray import (
    AbortSignal,
    Block,
    Deny,
    ExecutionToken,
    PtcDispatchLog,
    ReplaceValue,
    ToolDefinition,
    ToolOutput,
    define_tool,
    text_block,
)
from toolray.code import CodeRunOutcome

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


def plain_tool(name: str) -> ToolDefinition:
    """A tool without parameters whose value is its own name."""
    return define_tool(
        name=name,
        description="scoped",
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=lambda args, ctx: name,
    )


# ---------------------------------------------------------------- C-CODE-1
@pytest.mark.parametrize("mode", ["code", "both"])
async def test_c_code_1_run_code_is_never_bound_inside_a_program(mode: str) -> None:
    reg, fake = code_registry(mode)
    register_echo(reg)
    reg.scope("agent").register(plain_tool("own"))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=sorted(bindings))

    fake.behavior = program
    result = await run_code(reg)
    assert result.value == {"logs": [], "result": ["echo", "own"]}


async def test_c_code_1_bindings_follow_the_callers_restrictions() -> None:
    reg, fake = code_registry()
    register_echo(reg, "kept")
    register_echo(reg, "denied")
    reg.scope("agent").restrict(deny=["denied"])

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=sorted(bindings))

    fake.behavior = program
    assert (await run_code(reg)).value == {"logs": [], "result": ["kept"]}


# ---------------------------------------------------------------- C-CODE-3
async def test_c_code_3_sub_call_identity() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    seen: list[Any] = []
    outer: list[Any] = []

    def pre(execution: Any, next: Any) -> Any:
        (outer if execution.name == "run_code" else seen).append(execution)
        return next()

    reg.on_pre_execute(pre)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        for value in ("a", "b", "c"):
            await bindings["echo"]({"value": value})
        return outcome()

    fake.behavior = program
    result = await run_code(reg, call_id="call-1", root_call_id="root-0")
    assert not result.is_error
    assert [e.call_id for e in seen] == ["call-1:ptc:1", "call-1:ptc:2", "call-1:ptc:3"]
    assert {e.root_call_id for e in seen} == {"root-0"}
    assert {e.scope for e in seen} == {"agent"}
    token = outer[0].token
    assert all(isinstance(e.parent, ExecutionToken) and e.parent is token for e in seen)
    # the run-scoped signal: neither the outer signal nor live once the run settled
    signals = {id(e.signal) for e in seen}
    assert len(signals) == 1
    assert id(outer[0].signal) not in signals
    assert seen[0].signal.aborted
    assert seen[0].signal.reason == "run_code settled"


async def test_c_code_3_rejected_calls_consume_no_number() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    ids: list[str] = []
    reg.on_result(lambda execution, result: ids.append(execution.call_id))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        bad = await caught(bindings["echo"]({"value": {1, 2}}))
        await bindings["echo"]({"value": "ok"})
        return outcome(result=bad)

    fake.behavior = program
    result = await run_code(reg)
    assert result.value["result"].startswith("tool arguments must be lossless JSON: ")
    assert ids == ["call-1:ptc:1", "call-1"]
    assert calls == [{"value": "ok"}]


async def test_c_code_3_nested_observers_see_only_an_opaque_parent_token() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    parents: list[Any] = []
    reg.on_result(lambda execution, result: parents.append(execution.parent))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "x"})
        return outcome(result="done")

    fake.behavior = program
    assert text(await run_code(reg)) == "done"
    assert type(parents[0]) is ExecutionToken
    assert parents[1] is None


# ---------------------------------------------------------------- C-CODE-4
async def test_c_code_4_a_pre_execute_deny_reaches_the_program() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)

    def pre(execution: Any, next: Any) -> Any:
        return Deny("not on my watch") if execution.name == "echo" else next()

    reg.on_pre_execute(pre)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await caught(bindings["echo"]({"value": "x"})))

    fake.behavior = program
    assert text(await run_code(reg)) == "not on my watch"
    assert calls == []


async def test_c_code_4_a_throwing_pre_execute_settles_without_post_execute() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    posts: list[str] = []

    def pre(execution: Any, next: Any) -> Any:
        if execution.name == "echo":
            raise RuntimeError("gate exploded")
        return next()

    def post(execution: Any, result: Any, next: Any) -> Any:
        posts.append(execution.name)
        return next()

    reg.on_pre_execute(pre)
    reg.on_post_execute(post)
    log = log_step()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await caught(bindings["echo"]({"value": "x"})))

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert result.value == {"logs": [], "result": "gate exploded"}
    assert calls == []
    assert posts == ["run_code"]
    settles = events(log, "tool/ptc-dispatch")
    assert [(e["name"], e["isError"]) for e in settles] == [("echo", True)]


async def test_c_code_4_guards_around_post_and_observers_all_apply() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    register_echo(reg, "blocked")
    register_echo(reg, "guarded")
    stages: list[str] = []
    reg.scope("agent").guard(lambda e: "no guarded calls" if e.name == "guarded" else None)

    async def around(execution: Any, next: Any) -> Any:
        stages.append(f"around:{execution.call_id}")
        return await next()

    def post(execution: Any, result: Any, next: Any) -> Any:
        if execution.name == "blocked":
            return Block([text_block("blocked by policy")])
        if execution.name == "echo":
            return ReplaceValue("replaced")
        return next()

    reg.on_execute(around)
    reg.on_post_execute(post)
    reg.on_result(lambda execution, result: stages.append(f"result:{execution.call_id}"))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(
            result=[
                await caught(bindings["guarded"]({"value": "x"})),
                await caught(bindings["blocked"]({"value": "x"})),
                await bindings["echo"]({"value": "x"}),
            ]
        )

    fake.behavior = program
    result = await run_code(reg)
    assert result.value["result"] == ["no guarded calls", "blocked by policy", "replaced"]
    assert "around:call-1:ptc:2" in stages
    assert "around:call-1:ptc:1" not in stages
    assert stages[-1] == "result:call-1"
    assert [s for s in stages if s.startswith("result:")][:3] == [
        "result:call-1:ptc:1",
        "result:call-1:ptc:2",
        "result:call-1:ptc:3",
    ]


async def test_c_code_4_an_unregistered_tool_fails_as_unknown() -> None:
    reg, fake = code_registry()
    dispose = reg.register(plain_tool("ephemeral"))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        dispose()
        return outcome(result=await caught(bindings["ephemeral"]({})))

    fake.behavior = program
    assert text(await run_code(reg)) == 'unknown tool "ephemeral"'


async def test_c_code_4_sub_calls_bypass_the_collapse_and_need_the_step_set() -> None:
    reg, fake = code_registry()
    reg.register(plain_tool("cond"), when=lambda ctx: True)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await caught(bindings["cond"]({})))

    fake.behavior = program
    assert text(await run_code(reg)) == 'unknown tool "cond"'  # no step set: not admitted
    from ._registry_helpers import resolve

    tool_set = await resolve(reg, "agent")

    async def admitted(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        return outcome(result=await bindings["cond"]({}))

    fake.behavior = admitted
    assert text(await run_code(reg, tool_set=tool_set)) == "cond"


# ---------------------------------------------------------------- C-CODE-5
async def test_c_code_5_the_program_gets_the_value_or_the_failure_message_only() -> None:
    reg, fake = code_registry()

    async def fail(args: Any, ctx: Any) -> Any:
        raise ValueError("deliberate failure")

    reg.register(
        define_tool(
            name="fail",
            description="always fails",
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=fail,
        )
    )
    reg.register(
        define_tool(
            name="obj",
            description="a structured value",
            parameters={},
            output=ToolOutput(
                schema={"type": "object", "additionalProperties": True, "properties": {}},
                render=lambda a, v: [text_block("rendered, not the value")],
            ),
            execute=lambda args, ctx: {"n": 1, "list": [1, 2]},
        )
    )

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        value = await bindings["obj"]({})
        return outcome(result=[value, f"caught: {await caught(bindings['fail']({}))}"])

    fake.behavior = program
    result = await run_code(reg)
    assert result.value["result"] == [{"n": 1, "list": [1, 2]}, "caught: deliberate failure"]


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
    from toolray import AbortController, BatchExecutor, ToolBatchInput, ToolCall
    from toolray.lowlevel import run_body_inline

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
    from toolray import AbortController, BatchExecutor, ToolBatchInput, ToolCall

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
