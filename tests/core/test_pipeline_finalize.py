"""P-FIN: ``finalize_content``.

Python mapping: "returning ``undefined``" is returning ``None``; "``exec.arguments`` is
``undefined``" is ``execution.arguments is None``. Every entry has a Python meaning except
the agent-loop skip of P-FIN-3, which is reached through ``execute_batch`` with a caller
already aborted (the only way to produce a synthetic skipped call).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from toolray import (
    Accept,
    Deny,
    FrozenList,
    HarnessError,
    ToolBatchInput,
    ToolCall,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    text_block,
)

from ._pipeline_helpers import (
    ARGS_NOT_JSON,
    NOT_LOSSLESS,
    Probe,
    aborted_signal,
    call,
    error_wire,
    make_tool,
    msg,
    texts,
)

META_OUT = ToolOutput(
    schema={"type": "string"},
    render=lambda a, v: [text_block(v)],
    presentation_meta=lambda a, v: {"m": v},
)


class Finalizer:
    """A ``finalize_content`` recording its calls and returning ``answer``."""

    def __init__(self, answer: Any = None, raises: Exception | None = None) -> None:
        self.answer = answer
        self.raises = raises
        self.calls: list[tuple[Any, Any]] = []

    def __call__(self, execution: Any, result: Any) -> Any:
        self.calls.append((execution, result))
        if self.raises is not None:
            raise self.raises
        return self.answer


async def test_p_fin_1_callback_captured_at_call_start() -> None:
    reg = ToolRegistry()
    bounded = Finalizer([text_block("bounded failure")])
    dispose = reg.register(make_tool(finalize_content=bounded))

    async def pre(execution: Any, next_: Any) -> Any:
        dispose()
        raise HarnessError("policy failed", "POLICY_FAILED")

    reg.on_pre_execute(pre)
    result = await reg.execute(call())
    assert len(bounded.calls) == 1
    assert result.content == [text_block("bounded failure")]
    assert result.error == ToolFailure(  # type: ignore[union-attr]
        "policy failed", ToolErrorInfo("HarnessError", "POLICY_FAILED")
    )


async def test_p_fin_1_replacement_definition_does_not_change_the_callback() -> None:
    reg = ToolRegistry()
    original, replacement = Finalizer(), Finalizer()
    dispose = reg.register(make_tool(finalize_content=original))
    swapped: list[bool] = []

    async def pre(execution: Any, next_: Any) -> Any:
        if not swapped:
            dispose()
            reg.register(make_tool(finalize_content=replacement))
            swapped.append(True)
        return await next_()

    reg.on_pre_execute(pre)
    result = await reg.execute(call(arguments={"text": "x"}))
    assert not result.is_error  # the new definition ran the body
    assert (len(original.calls), len(replacement.calls)) == (1, 0)


@pytest.mark.parametrize(
    "origin",
    [
        "success",
        "pre-aborted",
        "deny",
        "pre-throw",
        "wrapper-throw",
        "args-snapshot",
        "materialize",
    ],
    ids=lambda o: f"P-FIN-2-{o}",
)
async def test_p_fin_2_called_exactly_once_for_every_outcome(
    reg: ToolRegistry, probe: Probe, origin: str
) -> None:
    probe.register()
    signal = aborted_signal() if origin == "pre-aborted" else None
    arguments: Any = {"bad": {1}} if origin == "args-snapshot" else {}

    async def hook(*args: Any) -> Any:
        if origin == "deny":
            return Deny("no")
        if origin in ("pre-throw", "wrapper-throw"):
            raise RuntimeError(origin)
        return await args[-1]()

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        return Accept(content=[{"type": "text", "text": {1}}])

    if origin in ("deny", "pre-throw"):
        reg.on_pre_execute(hook)
    if origin == "wrapper-throw":
        reg.on_execute(hook)
    if origin == "materialize":
        reg.on_post_execute(post)
    await reg.execute(call(arguments=arguments, signal=signal))
    assert probe.counts["finalize"] == 1


async def test_p_fin_3_not_called_when_no_definition_was_visible_at_start(
    reg: ToolRegistry, probe: Probe
) -> None:

    async def pre(execution: Any, next_: Any) -> Any:
        probe.register("late")  # visible at dispatch, not at start
        return await next_()

    reg.on_pre_execute(pre)
    result = await reg.execute(call("late", {"text": "x"}))
    assert result.content == [text_block("x")]
    assert probe.counts["body"] == 1
    assert probe.counts["finalize"] == 0


@pytest.mark.parametrize(
    ("aborted", "expected"),
    [(False, 0), (True, 1)],
    ids=["P-FIN-3-collapse", "P-FIN-3-collapse-aborted"],
)
async def test_p_fin_3_code_mode_collapse(
    reg: ToolRegistry, probe: Probe, aborted: bool, expected: int
) -> None:
    probe.register()
    reg.scope("agent").present_as("code")
    signal = aborted_signal() if aborted else None
    await reg.execute(call(scope="agent", signal=signal))
    assert probe.counts["finalize"] == expected


async def test_p_fin_3_not_called_for_a_synthetic_skipped_call(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    batch = ToolBatchInput([ToolCall("c1", "echo", "{}")], aborted_signal())
    out = await reg.execute_batch(batch)
    assert out.results[0].result.is_error
    assert probe.counts["finalize"] == 0
    assert probe.counts["result"] == 0


async def test_p_fin_4_receives_the_materialized_result() -> None:
    reg = ToolRegistry()
    fin = Finalizer()
    reg.register(make_tool(finalize_content=fin))
    await reg.execute(call(arguments={"text": "x"}))
    await reg.execute(call(arguments={"bad": {1}}))
    (exec_ok, ok), (exec_bad, bad) = fin.calls
    assert type(ok.content) is FrozenList
    with pytest.raises(dataclasses.FrozenInstanceError):
        ok.content = []
    assert exec_ok.arguments == {"text": "x"}
    assert exec_bad.arguments is None
    assert bad.to_wire() == error_wire(ARGS_NOT_JSON)


async def test_p_fin_5_returning_none_keeps_the_content() -> None:
    reg = ToolRegistry()
    fin = Finalizer(None)
    reg.register(make_tool(finalize_content=fin))
    result = await reg.execute(call())
    assert result.content == [text_block("")]
    assert len(fin.calls) == 1


async def test_p_fin_6_returned_blocks_replace_only_the_content() -> None:
    reg = ToolRegistry()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("deferred"))
        ctx.conclude_turn()
        return "v"

    reg.register(
        make_tool("echo", body, output=META_OUT, finalize_content=Finalizer([text_block("final")]))
    )
    result = await reg.execute(call())
    assert isinstance(result, ToolExecutionSuccess)
    assert result.content == [text_block("final")]
    assert (result.value, result.meta, result.concludes_turn) == ("v", {"m": "v"}, True)
    assert texts(result.additional_contexts) == ["deferred"]

    failing = ToolRegistry()
    failing.register(make_tool(finalize_content=Finalizer([text_block("final")])))
    failing.guard(lambda execution: "denied")
    denied = await failing.execute(call())
    assert isinstance(denied, ToolExecutionFailure)
    assert denied.error.message == "denied"
    assert denied.content == [text_block("final")]


async def test_p_fin_7_throwing_callback_is_normalized_and_not_called_again() -> None:
    reg = ToolRegistry()

    async def body(args: Any, ctx: Any) -> str:
        ctx.defer_context(msg("deferred"))
        return "v"

    fin = Finalizer(raises=RuntimeError("finalizer broke"))
    reg.register(make_tool("echo", body, output=META_OUT, finalize_content=fin))
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("finalizer broke")
    assert result.additional_contexts == ()
    assert result.meta is None
    assert len(fin.calls) == 1


async def test_p_fin_8_lossy_content_is_an_error_and_not_called_again() -> None:
    reg = ToolRegistry()
    fin = Finalizer([{"type": "text", "text": {1}}])
    reg.register(make_tool(finalize_content=fin))
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(NOT_LOSSLESS)
    assert len(fin.calls) == 1


async def test_p_fin_9_candidate_is_materialized_before_the_callback() -> None:
    reg = ToolRegistry()
    fin = Finalizer()
    reg.register(make_tool(finalize_content=fin))

    async def lossy(execution: Any, result: Any, next_: Any) -> Any:
        return Accept(content=[{"type": "text", "text": {1}}])

    reg.on_post_execute(lossy)
    result = await reg.execute(call())
    [(_, received)] = fin.calls
    assert received.to_wire() == error_wire(NOT_LOSSLESS)
    assert result.to_wire() == error_wire(NOT_LOSSLESS)
