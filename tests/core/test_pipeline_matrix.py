"""The stage matrix and the "Which outcome wins" precedence list.

One parametrized case per matrix row (rows with several origins — "pre-execute listener /
approval / guard throws" — get one case per origin), counting every stage with the
recording ``Probe``: pre-execute, guard, around, body, post-execute, ``finalize_content`` and
result observers. Then one test per line of the precedence list (line 8, "inside
dispatch", has one case per bullet).

The last matrix row (the agent loop's synthetic skipped call) cannot be produced by
``execute()``: it is reached through ``execute_batch`` with the caller already aborted.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from toolray import (
    AbortController,
    Accept,
    ApprovalRequest,
    Ask,
    Block,
    Deny,
    HarnessError,
    TimeoutPolicy,
    ToolBatchInput,
    ToolCall,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionSuccess,
    ToolFailure,
    ToolRegistry,
    text_block,
)
from toolray.testing import FakeClock

from . import _pipeline_helpers as h
from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    ABORTED_INFO,
    ABORTED_MSG,
    ARGS_NOT_JSON,
    NOT_LOSSLESS,
    Probe,
    aborted_signal,
    assert_failure,
    call,
    code_of,
    error_wire,
    stage_counts,
)

Scenario = Callable[[ToolRegistry, Probe], Awaitable[Any]]
GATES = {"pre": 1, "finalize": 1, "result": 1}
ALL = h.ALL_STAGES


async def _unknown_removed_before_dispatch(reg: ToolRegistry, probe: Probe) -> Any:
    dispose = probe.register()

    async def remove(execution: Any, next_: Any) -> Any:
        dispose()
        return await next_()

    reg.on_pre_execute(remove)
    return await reg.execute(call())


MATRIX: list[tuple[str, Scenario, dict[str, int], str | None]] = [
    ("01-args-snapshot-fails", h.sc_args_fail, stage_counts(finalize=1, result=1), None),
    ("02-collapse", h.sc_collapse, stage_counts(result=1), "UNKNOWN_TOOL"),
    (
        "03-collapse-pre-aborted",
        h.sc_collapse_aborted,
        stage_counts(finalize=1, result=1),
        "ABORTED_BEFORE_DISPATCH",
    ),
    (
        "04-pre-aborted-entry",
        h.sc_pre_aborted,
        stage_counts(finalize=1, result=1),
        "ABORTED_BEFORE_DISPATCH",
    ),
    ("05-pre-execute-throws", h.sc_pre_throws, stage_counts(**GATES), None),
    ("05-approval-throws", h.sc_approval_throws, stage_counts(**GATES), None),
    ("05-guard-throws", h.sc_guard_throws, stage_counts(guard=1, **GATES), None),
    ("06-pre-execute-deny", h.sc_pre_deny, stage_counts(post=1, **GATES), None),
    ("06-ask-deny", h.sc_ask_deny, stage_counts(post=1, **GATES), None),
    ("06-guard-deny", h.sc_guard_deny, stage_counts(guard=1, post=1, **GATES), None),
    (
        "07-aborted-during-gates",
        h.sc_aborted_in_gates,
        stage_counts(guard=1, post=1, **GATES),
        "ABORTED_BEFORE_DISPATCH",
    ),
    ("08-around-throws", h.sc_around_throws, stage_counts(guard=1, around=1, **GATES), None),
    (
        "09-wrapper-success-bad-value",
        h.sc_wrapper_bad_value,
        stage_counts(guard=1, around=1, **GATES),
        "INVALID_TOOL_OUTPUT",
    ),
    (
        "09-wrapper-success-tool-gone",
        h.sc_wrapper_tool_gone,
        stage_counts(guard=1, around=1, body=1, **GATES),
        "UNKNOWN_TOOL",
    ),
    (
        "10-fused-signal-aborted",
        h.sc_fused_aborted,
        stage_counts(guard=1, around=1, post=1, **GATES),
        "ABORTED_BEFORE_DISPATCH",
    ),
    (
        "11-unknown-tool",
        h.sc_unknown,
        stage_counts(pre=1, guard=1, around=1, post=1, result=1),
        "UNKNOWN_TOOL",
    ),
    (
        "11-unknown-tool-removed-before-dispatch",
        _unknown_removed_before_dispatch,
        stage_counts(guard=1, around=1, post=1, **GATES),
        "UNKNOWN_TOOL",
    ),
    ("12-body-throws", h.sc_body_throws, ALL, None),
    ("12-invalid-args", h.sc_invalid_args, ALL, "INVALID_ARGS"),
    ("12-invalid-tool-output", h.sc_invalid_output, ALL, "INVALID_TOOL_OUTPUT"),
    ("13-success", h.sc_success, ALL, None),
    ("14-post-execute-throws", h.sc_post_throws, ALL, None),
]


@pytest.mark.parametrize(
    ("scenario", "expected", "code"),
    [row[1:] for row in MATRIX],
    ids=[f"stage-matrix-row{row[0]}" for row in MATRIX],
)
async def test_stage_matrix_row(
    reg: ToolRegistry, probe: Probe, scenario: Scenario, expected: dict[str, int], code: Any
) -> None:
    result = await scenario(reg, probe)
    assert probe.stages() == expected
    assert code_of(result) == code
    assert probe.results == [result]


async def test_stage_matrix_row15_synthetic_skipped_call_runs_nothing(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    batch = ToolBatchInput(
        [ToolCall("c1", "echo", "{}"), ToolCall("c2", "echo", "{}")], aborted_signal()
    )
    out = await reg.execute_batch(batch)
    assert [code_of(r.result) for r in out.results] == ["ABORTED_BEFORE_DISPATCH"] * 2
    assert probe.stages() == stage_counts()


# ------------------------------------------------------------------ which outcome wins


async def test_precedence_line1_argument_failure_beats_abort_and_collapse(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    reg.scope("agent").present_as("code")
    result = await reg.execute(call(arguments={"bad": {1}}, scope="agent", signal=aborted_signal()))
    assert result.to_wire() == error_wire(ARGS_NOT_JSON)


async def test_precedence_line2_collapse_aborted_or_route_hint(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    reg.scope("agent").present_as("code")
    aborted = await reg.execute(call(scope="agent", signal=aborted_signal()))
    hinted = await reg.execute(call(scope="agent"))
    assert aborted.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert hinted.to_wire() == error_wire(
        'unknown tool "echo": only `run_code` is callable directly — call `echo` from inside a '
        "`run_code` program instead",
        ("ToolNotFoundError", "UNKNOWN_TOOL"),
    )
    assert probe.counts["pre"] == 0


async def test_precedence_line3_caller_aborted_at_entry(reg: ToolRegistry, probe: Probe) -> None:
    probe.register()
    reg.guard(lambda execution: "would deny")
    result = await reg.execute(call(signal=aborted_signal()))
    assert result.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["pre"] == 0


class _AbortingApproval:
    def __init__(self, ctrl: AbortController, outcome: Any = None) -> None:
        self.ctrl, self.outcome = ctrl, outcome

    async def request(self, request: ApprovalRequest) -> Any:
        self.ctrl.abort("user")
        if self.outcome is None:
            raise RuntimeError("gate broke")
        return self.outcome


@pytest.mark.parametrize(
    "gate", ["pre", "approval", "guard"], ids=lambda g: f"precedence-line4-{g}"
)
async def test_precedence_line4_gate_throw_beats_cancellation(
    reg: ToolRegistry, probe: Probe, gate: str
) -> None:
    probe.register()
    ctrl = AbortController()

    async def pre(execution: Any, next_: Any) -> Any:
        if gate == "approval":
            return Ask("why")
        ctrl.abort("user")
        if gate == "pre":
            raise RuntimeError("gate broke")
        return await next_()

    def guard(execution: Any) -> None:
        raise RuntimeError("gate broke")

    reg.on_pre_execute(pre)
    if gate == "guard":
        reg.guard(guard)
    if gate == "approval":
        reg.set_approval(_AbortingApproval(ctrl))  # type: ignore[attr-defined]
    result = await reg.execute(call(scope="agent", signal=ctrl.signal))
    assert result.to_wire() == error_wire("gate broke")
    assert probe.counts["post"] == 0


async def test_precedence_line5_approval_cancelled_with_caller_aborted(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()
    reg.set_approval(_AbortingApproval(ctrl, "cancelled"))  # type: ignore[attr-defined]
    reg.on_pre_execute(lambda execution, next_: Ask())
    result = await reg.execute(call(scope="agent", signal=ctrl.signal))
    assert result.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["guard"] == 0


@pytest.mark.parametrize("gate", ["pre", "guard"], ids=lambda g: f"precedence-line6-{g}")
async def test_precedence_line6_denial_beats_cancellation_in_the_gates(
    reg: ToolRegistry, probe: Probe, gate: str
) -> None:
    probe.register()
    ctrl = AbortController()

    async def pre(execution: Any, next_: Any) -> Any:
        ctrl.abort("user")
        return Deny("denied") if gate == "pre" else await next_()

    reg.on_pre_execute(pre)
    reg.guard(lambda execution: "denied")
    result = await reg.execute(call(signal=ctrl.signal))
    assert result.to_wire() == error_wire("denied")
    assert probe.counts["post"] == 1


async def test_precedence_line7_caller_aborted_after_the_gates(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()
    reg.guard(lambda execution: ctrl.abort("user"))
    result = await reg.execute(call(signal=ctrl.signal))
    assert result.to_wire() == error_wire(ABORTED_BEFORE, ABD_INFO)
    assert (probe.counts["around"], probe.counts["post"]) == (0, 1)


def _line8(case: str, reg: ToolRegistry, probe: Probe, ctrl: AbortController) -> str:
    """Set up one bullet of line 8; returns the name to call."""
    own = AbortController()  # a wrapper's replacement signal

    async def body(args: Any, ctx: Any) -> Any:
        if case == "fused-success":
            own.abort("own deadline")  # only the wrapper's signal; the caller stays intact
            return "ok"
        ctrl.abort("user")
        if case == "body-throw":
            raise HarnessError("tool failed", "TOOL_FAILURE")
        return 42 if case == "bad-output" else "ok"

    async def wrapper(execution: Any, next_: Any) -> Any:
        if case == "wrapper-throw":
            ctrl.abort("user")
            raise RuntimeError("wrapper broke")
        if case == "wrapper-failure":
            ctrl.abort("user")
            return ToolExecutionFailure(ToolFailure("wrapper failure"), [text_block("wf")])
        if case == "late-short-circuit":
            ctrl.abort("user")
            return ToolExecutionSuccess("ok", [text_block("ok")])
        previous = execution.signal
        if case == "fused-aborted":
            execution.signal = aborted_signal("deadline")
        if case == "fused-success":
            execution.signal = own.signal
        try:
            result = await next_()
        finally:
            execution.signal = previous
        if case == "late-after-body":
            ctrl.abort("user")
        return result

    plain = case in ("late-after-body", "late-short-circuit") or case.startswith("wrapper")
    probe.register("echo", None if plain else body)
    reg.on_execute(wrapper)
    return "nope" if case in ("unknown", "fused-aborted") else "echo"


LINE8 = {
    "wrapper-throw": ("wrapper broke", None),
    "wrapper-failure": ("wrapper failure", None),
    "fused-aborted": (ABORTED_BEFORE, ABD_INFO),
    "unknown": ('unknown tool "nope"', ("ToolNotFoundError", "UNKNOWN_TOOL")),
    "body-throw": ("tool failed", ("HarnessError", "TOOL_FAILURE")),
    "bad-output": (
        'tool "echo" returned invalid output: "value" must be a string',
        ("ToolOutputError", "INVALID_TOOL_OUTPUT"),
    ),
    "fused-success": (ABORTED_MSG, ABORTED_INFO),
    "late-after-body": (ABORTED_MSG, ABORTED_INFO),
    "late-short-circuit": (ABORTED_BEFORE, ABD_INFO),
}


@pytest.mark.parametrize("case", list(LINE8), ids=lambda c: f"precedence-line8-{c}")
async def test_precedence_line8_inside_dispatch(reg: ToolRegistry, probe: Probe, case: str) -> None:
    ctrl = AbortController()
    name = _line8(case, reg, probe, ctrl)
    result = await reg.execute(call(name, signal=ctrl.signal))
    message, info = LINE8[case]
    if case == "wrapper-failure":
        assert result.error == ToolFailure(message)  # type: ignore[union-attr]
        assert result.content == [text_block("wf")]
    else:
        assert_failure(result, message, info)


async def test_precedence_line8_timeout_replaces_whatever_came_back() -> None:
    clock = FakeClock(autojump=True)
    reg = ToolRegistry(clock=clock)

    async def body(args: Any, ctx: Any) -> str:
        await ctx.signal.wait()
        return "a perfectly good success"

    reg.register(h.make_tool("echo", body, timeout_ms=100))
    TimeoutPolicy(clock=clock).install(reg)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire(
        "tool call timed out after 100ms", ("ToolTimeoutError", "TOOL_TIMEOUT")
    )


def _post_case(case: str, ctrl: AbortController) -> Any:
    async def post(execution: Any, result: Any, next_: Any) -> Any:
        ctrl.abort("user")
        if case == "throw":
            raise RuntimeError("post broke")
        if case == "block":
            return Block([text_block("blocked")])
        return Accept()

    return post


@pytest.mark.parametrize(
    ("case", "message", "info"),
    [
        ("throw", "post broke", None),
        ("block", "blocked", None),
        ("accept-body-ran", ABORTED_MSG, ABORTED_INFO),
        ("accept-short-circuit", ABORTED_BEFORE, ABD_INFO),
    ],
    ids=[
        "precedence-line9-throw",
        "precedence-line9-block",
        "precedence-line9-accept-body-ran",
        "precedence-line9-accept-short-circuit",
    ],
)
async def test_precedence_line9_post_execute(
    reg: ToolRegistry, probe: Probe, case: str, message: str, info: Any
) -> None:
    probe.register()
    ctrl = AbortController()
    if case == "accept-short-circuit":
        reg.on_execute(lambda execution, next_: ToolExecutionSuccess("v", [text_block("v")]))
    reg.on_post_execute(_post_case(case, ctrl))
    result = await reg.execute(call(signal=ctrl.signal))
    assert isinstance(result, ToolExecutionFailure)
    assert result.error == ToolFailure(message, ToolErrorInfo(*info) if info else None)
    if case == "block":
        assert result.content == [text_block("blocked")]


@pytest.mark.parametrize("case", ["throw", "lossy"], ids=lambda c: f"precedence-line10-{c}")
async def test_precedence_line10_finalize_failure_is_final(case: str) -> None:
    calls: list[str] = []

    def finalize(execution: Any, result: Any) -> Any:
        calls.append(case)
        if case == "throw":
            raise RuntimeError("finalizer broke")
        return [{"type": "text", "text": {1}}]

    reg = ToolRegistry()
    reg.register(h.make_tool(finalize_content=finalize))
    result = await reg.execute(call())
    expected = "finalizer broke" if case == "throw" else NOT_LOSSLESS
    assert result.to_wire() == error_wire(expected)
    assert calls == [case]
