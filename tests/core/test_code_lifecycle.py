"""C-CODE-8/12/13: contexts, the run lifecycle and outer cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from toolray import (
    AbortController,
    AbortSignal,
    Accept,
    Block,
    ToolOutput,
    UserMessage,
    define_tool,
    text_block,
)
from toolray.code import CodeRunOutcome, code_run_failed
from toolray.errors import TOOL_ABORTED, TOOL_ABORTED_BEFORE_DISPATCH, AbortError

from ._code_helpers import (
    Gated,
    Watch,
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

IMAGE = {"type": "image", "data": "aGk=", "mimeType": "image/png"}


def content_tool(name: str, blocks: list[dict[str, Any]], **fields: Any) -> Any:
    return define_tool(
        name=name,
        description="returns fixed content",
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: blocks),
        execute=lambda args, ctx: "value",
        **fields,
    )


def noting(name: str) -> Any:
    def post(execution: Any, result: Any, next: Any) -> Any:
        if execution.name != name:
            return next()
        note = UserMessage([text_block(f"context for {execution.call_id}")], source="test")
        return Accept(additional_contexts=[note])

    return post


# ---------------------------------------------------------------- C-CODE-8
async def test_c_code_8_sub_call_contexts_ride_the_outer_result() -> None:
    reg, fake = code_registry()
    register_echo(reg)
    reg.on_post_execute(noting("echo"))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "x"})
        await bindings["echo"]({"value": "y"})
        return outcome(result="done")

    fake.behavior = program
    result = await run_code(reg)
    assert [(m.content[0]["text"], m.source) for m in result.additional_contexts] == [
        ("context for call-1:ptc:1", "test"),
        ("context for call-1:ptc:2", "test"),
    ]


async def test_c_code_8_image_content_of_a_success_is_deferred() -> None:
    reg, fake = code_registry()
    reg.register(content_tool("image_result", [text_block("image result"), IMAGE]))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["image_result"]({})
        return outcome(result="done")

    fake.behavior = program
    (message,) = (await run_code(reg)).additional_contexts
    assert message.source == "tools-code-mode"
    assert message.content == [text_block("image result"), IMAGE]


@pytest.mark.parametrize("decision", ["block", "replace"])
async def test_c_code_8_images_removed_by_post_execute_are_not_deferred(decision: str) -> None:
    reg, fake = code_registry()
    reg.register(content_tool("image_result", [IMAGE]))

    def post(execution: Any, result: Any, next: Any) -> Any:
        if execution.name != "image_result":
            return next()
        if decision == "block":
            return Block([text_block("blocked")])
        return Accept(content=[text_block("replaced")])

    reg.on_post_execute(post)

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await caught(bindings["image_result"]({}))
        return outcome(result="done")

    fake.behavior = program
    result = await run_code(reg)
    assert not result.is_error
    assert result.additional_contexts == ()


async def test_c_code_8_contexts_are_kept_when_run_code_fails_later() -> None:
    reg, fake = code_registry("both")
    register_echo(reg)
    reg.on_post_execute(noting("echo"))

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await bindings["echo"]({"value": "x"})
        raise code_run_failed("exception", "program failed later")

    fake.behavior = program
    result = await run_code(reg)
    assert result.is_error
    assert [m.content[0]["text"] for m in result.additional_contexts] == [
        "context for call-1:ptc:1"
    ]


async def test_c_code_8_only_a_successful_sub_result_concludes_the_turn() -> None:
    reg, fake = code_registry()

    def finalize(args: Any, ctx: Any) -> str:
        ctx.conclude_turn()
        return "done"

    reg.register(
        define_tool(
            name="finalize",
            description="terminal",
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=finalize,
        )
    )

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        await caught(bindings["finalize"]({}))
        return outcome(result="program complete")

    fake.behavior = program
    assert (await run_code(reg)).concludes_turn is True
    reg.on_post_execute(
        lambda e, r, next: (
            Block([text_block("terminal rejected")]) if e.name == "finalize" else next()
        )
    )
    recovered = await run_code(reg)
    assert not recovered.is_error
    assert recovered.concludes_turn is False


# ---------------------------------------------------------------- C-CODE-12
async def test_c_code_12_outer_abort_aborts_in_flight_and_abandons_queued_calls() -> None:
    reg, fake = code_registry()
    watch = Watch()
    slow = Gated(reg, "slow", safe=False, watch=watch)
    log = log_step()
    ctrl = AbortController()
    messages: list[str] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        first = asyncio.ensure_future(caught(bindings["slow"]({"id": "first"})))
        second = asyncio.ensure_future(caught(bindings["slow"]({"id": "second"})))
        await watch.until(lambda: slow.pending() == 1)
        ctrl.abort("user-cancel")
        messages.extend(await asyncio.gather(first, second))
        await signal.wait()
        raise AbortError(f"code run aborted: {signal.reason}")

    fake.behavior = program
    result = await run_code(reg, signal=ctrl.signal, log=log)
    assert result.is_error
    assert result.error.info.code == TOOL_ABORTED  # type: ignore[union-attr]
    assert slow.order == ["start:first", "end:first"]
    assert slow.saw_abort == ["first"]
    assert messages == [
        "run_code run is over (user-cancel); slow result discarded",
        "run_code run is over (user-cancel); slow tool call abandoned",
    ]
    assert [e["subCallId"] for e in events(log)] == ["call-1:ptc:1", "call-1:ptc:1"]
    assert events(log)[1]["isError"] is True


async def test_c_code_12_a_queued_call_abandoned_at_settlement_logs_nothing() -> None:
    reg, fake = code_registry()
    watch = Watch()
    writer = Gated(reg, "writer", safe=False, watch=watch)
    log = log_step()
    held: list[asyncio.Future[str]] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        held.append(asyncio.ensure_future(caught(bindings["writer"]({"id": "w1"}))))
        held.append(asyncio.ensure_future(caught(bindings["writer"]({"id": "w2"}))))
        await watch.until(lambda: writer.pending() == 1)
        raise code_run_failed("exception", "program failed with a queued call")

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert result.is_error
    assert [e["subCallId"] for e in events(log, "tool/ptc-dispatch-start")] == ["call-1:ptc:1"]
    assert [e["subCallId"] for e in events(log, "tool/ptc-dispatch")] == ["call-1:ptc:1"]
    assert writer.saw_abort == ["w1"]
    assert await held[1] == "run_code run is over (run_code settled); writer tool call abandoned"


async def test_c_code_12_quiescence_when_the_runtime_fails_with_a_call_in_flight() -> None:
    reg, fake = code_registry()
    watch = Watch()
    slow = Gated(reg, "slow", safe=False, watch=watch)
    log = log_step()
    held: list[Any] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        held.append(asyncio.ensure_future(caught(bindings["slow"]({"id": "orphan"}))))
        await watch.until(lambda: slow.pending() == 1)
        raise RuntimeError("backend exploded")

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert text(result) == "Error: backend exploded"
    # drained inside the run_code execution: the body saw the abort, the record exists
    assert slow.saw_abort == ["orphan"]
    assert [(e["name"], e["isError"]) for e in events(log, "tool/ptc-dispatch")] == [("slow", True)]


async def test_c_code_12_a_commit_in_progress_at_settlement_is_drained() -> None:
    reg, fake = code_registry()
    watch = Watch()
    gated = Gated(reg, "safe_read", safe=True, watch=watch)
    log = log_step()
    in_post = asyncio.Event()
    release_post = asyncio.Event()

    async def post(execution: Any, result: Any, next: Any) -> Any:
        if execution.name == "safe_read":
            in_post.set()
            await release_post.wait()
        return await next()

    reg.on_post_execute(post)
    held: list[Any] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        held.append(asyncio.ensure_future(caught(bindings["safe_read"]({"id": "a"}))))
        await watch.until(lambda: gated.pending() == 1)
        gated.release()
        await in_post.wait()
        asyncio.get_running_loop().call_soon(release_post.set)
        return outcome(result="returned-early")

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert text(result) == "returned-early"
    (settle,) = events(log, "tool/ptc-dispatch")
    assert (settle["name"], settle["isError"]) == ("safe_read", True)  # success → ABORTED
    assert await held[0] == "run_code run is over (run_code settled); safe_read result discarded"


async def test_c_code_12_a_binding_called_after_the_run_is_not_dispatched() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    kept: dict[str, Any] = {}

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        kept.update(bindings)
        return outcome()

    fake.behavior = program
    await run_code(reg)
    late = await caught(kept["echo"]({"value": "late"}))
    assert late == "run_code run is over (run_code settled); echo not dispatched"
    assert calls == []


# ---------------------------------------------------------------- C-CODE-13
async def test_c_code_13_a_pre_aborted_call_never_reaches_the_runtime() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    ctrl = AbortController()
    ctrl.abort("too-late")
    result = await run_code(reg, signal=ctrl.signal)
    assert result.to_wire() == {
        "content": [text_block("Error: tool call aborted before dispatch")],
        "isError": True,
        "error": {
            "message": "tool call aborted before dispatch",
            "info": {"name": "AbortError", "code": TOOL_ABORTED_BEFORE_DISPATCH},
        },
    }
    assert fake.runs == []
    assert calls == []


async def test_c_code_13_an_abort_mid_run_gives_aborted_and_rejects_late_bindings() -> None:
    reg, fake = code_registry()
    calls = register_echo(reg)
    ctrl = AbortController()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        ctrl.abort("cancelled-mid-run")
        return outcome(result=await caught(bindings["echo"]({"value": "x"})))

    fake.behavior = program
    result = await run_code(reg, signal=ctrl.signal)
    assert result.to_wire()["error"] == {
        "message": "tool call aborted",
        "info": {"name": "AbortError", "code": TOOL_ABORTED},
    }
    assert text(result) == "Error: tool call aborted"
    assert calls == []
