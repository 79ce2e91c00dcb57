"""P-PRE: the pre-execute waterfall and approval.

Every entry has a Python meaning. Approval answers are the strings of ``ApprovalOutcome``;
the service is mounted with ``registry.set_approval(service)`` and the approval
texts keep their wording (``agent``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from toolray import (
    AbortController,
    Allow,
    ApprovalRequest,
    Ask,
    Deny,
    HarnessError,
    ToolRegistry,
    text_block,
)
from toolray.testing import Gate

from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    Probe,
    aborted_signal,
    assert_failure,
    call,
    error_wire,
    make_tool,
    stage_counts,
    yield_turns,
)


class Approval:
    """An approval service answering ``outcome``, optionally holding until ``gate`` opens."""

    def __init__(self, outcome: Any, gate: Gate | None = None) -> None:
        self.outcome = outcome
        self.gate = gate
        self.entered = asyncio.Event()
        self.requests: list[ApprovalRequest] = []

    async def request(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        self.entered.set()
        if self.gate is not None:
            await self.gate.wait()
        return self.outcome


def _ask(reason: str | None = None) -> Any:
    async def pre(execution: Any, next_: Any) -> Any:
        return Ask(reason)

    return pre


async def test_p_pre_1_pre_aborted_entry_publishes_one_frozen_result(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    signal = aborted_signal()
    result = await reg.execute(call(signal=signal))
    assert result.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert probe.stages() == stage_counts(finalize=1, result=1)
    assert probe.results[0] is result
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.content = []  # type: ignore[misc]
    with pytest.raises(TypeError):
        result.content.append(text_block("x"))
    assert probe.seen["result"][0].signal is signal


async def test_p_pre_2_waterfall_composition_order_and_default_allow() -> None:
    reg = ToolRegistry()
    trace: list[str] = []
    innermost: list[Any] = []

    def listener(label: str, *, last: bool = False) -> Any:
        async def pre(execution: Any, next_: Any) -> Any:
            trace.append(f"{label}:before")
            decision = await next_()
            if last:
                innermost.append(decision)
            trace.append(f"{label}:after")
            return decision

        return pre

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        trace.append("post:before")
        decision = await next_()
        trace.append("post:after")
        return decision

    reg.on_pre_execute(listener("A"))
    reg.on_pre_execute(listener("B", last=True))
    reg.on_pre_execute(listener("C"), prepend=True)
    reg.on_post_execute(post)
    reg.register(make_tool())
    result = await reg.execute(call())
    assert not result.is_error
    assert trace == [
        "C:before",
        "A:before",
        "B:before",
        "B:after",
        "A:after",
        "C:after",
        "post:before",
        "post:after",
    ]
    assert innermost == [Allow()]


async def test_p_pre_3_deny_skips_dispatch_and_runs_post_with_a_frozen_result(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    frozen_checks: list[str] = []

    async def deny(execution: Any, next_: Any) -> Any:
        return Deny("policy says no")

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.content = []
        with pytest.raises(TypeError):
            result.content.append(text_block("mutated"))
        frozen_checks.append("frozen")
        return await next_()

    reg.on_pre_execute(deny)
    reg.on_post_execute(post)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("policy says no")
    assert probe.stages() == stage_counts(pre=1, post=1, finalize=1, result=1)
    assert frozen_checks == ["frozen"]


@pytest.mark.parametrize(
    ("exc", "info"),
    [
        (RuntimeError("listener broke"), None),
        (HarnessError("listener broke", "POLICY_BROKE"), ("HarnessError", "POLICY_BROKE")),
    ],
    ids=["P-PRE-4-plain", "P-PRE-4-harness"],
)
async def test_p_pre_4_throwing_listener_is_a_final_error(
    reg: ToolRegistry, probe: Probe, exc: Exception, info: Any
) -> None:
    probe.register()

    async def pre(execution: Any, next_: Any) -> Any:
        raise exc

    reg.on_pre_execute(pre)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("listener broke", info)
    assert probe.stages() == stage_counts(pre=1, finalize=1, result=1)


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("needs approval", "needs approval"),
        (None, 'tool "echo" requires approval (not yet supported)'),
    ],
    ids=["P-PRE-5-reason", "P-PRE-5-default"],
)
async def test_p_pre_5_ask_without_service_degrades_to_deny(
    reg: ToolRegistry, probe: Probe, reason: Any, text: str
) -> None:
    probe.register()
    reg.on_pre_execute(_ask(reason))
    result = await reg.execute(call(scope="agent"))
    assert result.to_wire() == error_wire(text)
    assert probe.counts["body"] == 0


async def test_p_pre_6_ask_without_agent_is_denied_without_asking(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    service = Approval("allowed-once")
    reg.set_approval(service)  # type: ignore[attr-defined]
    reg.on_pre_execute(_ask("why"))
    result = await reg.execute(call())
    text = 'tool "echo" requires approval, but the call has no agent to route it through'
    assert result.to_wire() == error_wire(text)
    assert service.requests == []


async def test_p_pre_7_allowed_once_forwards_the_ask_fields_and_dispatches(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    service = Approval("allowed-once")
    reg.set_approval(service)  # type: ignore[attr-defined]
    reg.on_pre_execute(_ask("why"))
    inp = call(arguments={"text": "hi"}, scope="agent", call_id="c-7")
    result = await reg.execute(inp)
    assert result.content == [text_block("hi")]
    [request] = service.requests
    assert (request.scope, request.tool_name, request.call_id, request.reason) == (
        "agent",
        "echo",
        "c-7",
        "why",
    )
    assert request.signal is inp.signal
    assert probe.stages() == stage_counts(
        pre=1, guard=1, around=1, body=1, post=1, finalize=1, result=1
    )


@pytest.mark.parametrize(
    ("outcome", "text"),
    [
        ("rejected", 'the user rejected tool "echo"'),
        ("cancelled", 'approval for tool "echo" was cancelled'),
        ("unavailable", 'tool "echo" requires approval, but no approval channel is available'),
    ],
    ids=["P-PRE-8-rejected", "P-PRE-9-cancelled", "P-PRE-10-unavailable"],
)
async def test_p_pre_8_9_10_approval_non_grants_deny(
    reg: ToolRegistry, probe: Probe, outcome: str, text: str
) -> None:
    probe.register()
    reg.set_approval(Approval(outcome))  # type: ignore[attr-defined]
    reg.on_pre_execute(_ask())
    result = await reg.execute(call(scope="agent"))
    assert result.to_wire() == error_wire(text)
    assert probe.stages() == stage_counts(pre=1, post=1, finalize=1, result=1)


async def test_p_pre_11_rogue_approval_outcome_is_a_final_error(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    reg.set_approval(Approval("yolo"))  # type: ignore[attr-defined]
    reg.on_pre_execute(_ask())
    result = await reg.execute(call(scope="agent"))
    assert result.is_error
    assert "unreachable" in result.content[0]["text"]
    assert result.error.message == 'unreachable variant in ApprovalOutcome: "yolo"'  # type: ignore[union-attr]
    assert probe.counts["post"] == 0
    assert probe.counts["finalize"] == 1


async def test_p_pre_12_cancellation_overtaking_approval_skips_dispatch(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    gate = Gate()
    service = Approval("allowed-once", gate)
    reg.set_approval(service)  # type: ignore[attr-defined]
    reg.on_pre_execute(_ask())
    ctrl = AbortController()
    task = asyncio.ensure_future(reg.execute(call(scope="agent", signal=ctrl.signal)))
    await service.entered.wait()
    ctrl.abort("user")
    gate.open()
    result = await task
    assert result.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0


@pytest.mark.parametrize(
    ("outcome", "expected", "info"),
    [
        ("cancelled", ABORTED_BEFORE, ABD_INFO),
        ("rejected", 'the user rejected tool "echo"', None),
        (
            "unavailable",
            'tool "echo" requires approval, but no approval channel is available',
            None,
        ),
    ],
    ids=["P-PRE-13-cancelled", "P-PRE-13-rejected", "P-PRE-13-unavailable"],
)
async def test_p_pre_13_aborted_caller_and_approval_answer(
    reg: ToolRegistry, probe: Probe, outcome: str, expected: str, info: Any
) -> None:
    probe.register()
    ctrl = AbortController()

    class Aborting(Approval):
        async def request(self, request: ApprovalRequest) -> Any:
            ctrl.abort("user")
            return self.outcome

    reg.set_approval(Aborting(outcome))  # type: ignore[attr-defined]
    reg.on_pre_execute(_ask())
    result = await reg.execute(call(scope="agent", signal=ctrl.signal))
    assert result.to_wire() == error_wire(expected, info)
    assert probe.counts["post"] == 1
    assert probe.counts["body"] == 0


def _aborting_pre(ctrl: AbortController, then: Any) -> Any:
    async def pre(execution: Any, next_: Any) -> Any:
        ctrl.abort("user")  # the caller aborts while this listener is still pending
        return await then(next_)

    return pre


async def test_p_pre_14_cancellation_during_pre_execute_then_allow(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()

    async def allow(next_: Any) -> Any:
        return await next_()

    reg.on_pre_execute(_aborting_pre(ctrl, allow))
    result = await reg.execute(call(signal=ctrl.signal))
    assert result.content == [text_block("Error: tool call aborted before dispatch")]
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0


async def test_p_pre_15_denial_settling_after_cancellation_is_kept(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()

    async def deny(next_: Any) -> Any:
        return Deny("policy denied the call")

    reg.on_pre_execute(_aborting_pre(ctrl, deny))
    result = await reg.execute(call(signal=ctrl.signal))
    assert result.to_wire() == error_wire("policy denied the call")


async def test_p_pre_16_failure_settling_after_cancellation_is_kept(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()

    async def throw(next_: Any) -> Any:
        raise RuntimeError("gate interrupted")

    reg.on_pre_execute(_aborting_pre(ctrl, throw))
    result = await reg.execute(call(signal=ctrl.signal))
    assert result.to_wire() == error_wire("gate interrupted")


async def test_p_pre_17_pending_pre_execute_is_never_abandoned(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    gate, entered = Gate(), asyncio.Event()
    ctrl = AbortController()

    async def slow(execution: Any, next_: Any) -> Any:
        entered.set()
        await gate.wait()
        return await next_()

    reg.on_pre_execute(slow)
    task = asyncio.ensure_future(reg.execute(call(signal=ctrl.signal)))
    await entered.wait()
    ctrl.abort("user")
    await yield_turns()
    assert not task.done()
    gate.open()
    result = await task
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["guard"] == 1  # the recheck happens after the awaited listener


async def test_p_pre_18_scoped_listener_sees_only_its_own_agent() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    seen: list[Any] = []

    async def scoped(execution: Any, next_: Any) -> Any:
        seen.append(execution.scope)
        return await next_()

    reg.scope("a").on_pre_execute(scoped)
    reg.scope("b")
    for scope in ("a", "b", None, "a"):
        await reg.execute(call(scope=scope))
    assert seen == ["a", "a"]


async def test_p_pre_19_unknown_name_goes_through_pre_execute_and_guards(
    reg: ToolRegistry, probe: Probe
) -> None:
    names: list[str] = []

    async def pre(execution: Any, next_: Any) -> Any:
        names.append(execution.name)
        return await next_()

    reg.on_pre_execute(pre)
    result = await reg.execute(call("nope"))
    assert names == ["nope"]
    assert probe.counts["guard"] == 1
    assert result.to_wire() == error_wire(
        'unknown tool "nope"', ("ToolNotFoundError", "UNKNOWN_TOOL")
    )
    assert probe.counts["post"] == 1


async def test_p_pre_18_ancestor_scope_listener_does_not_see_descendant_calls() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    seen: list[Any] = []

    async def scoped(execution: Any, next_: Any) -> Any:
        seen.append(execution.scope)
        return await next_()

    reg.scope("root").on_pre_execute(scoped)
    reg.scope("child", parent="root")
    await reg.execute(call(scope="child"))
    await reg.execute(call(scope="root"))
    assert seen == ["root"]
