"""C-CODE-1/3/4/5: the ``run_code`` bridge — bindings, sub-call identity, the full
pipeline behind each binding, and what the program sees.

The program is played by ``FakeRuntime.behavior`` (it calls the bindings it is given), so
each contract is checked without a child process; ``tests/code/test_registry_programs.py``
runs the same paths through real programs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from toolray import (
    AbortSignal,
    Block,
    Deny,
    ExecutionToken,
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
