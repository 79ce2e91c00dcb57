"""Contract: fault classes and batch deadlines, the same on every backend (API §28).

Every batch is projected with each result's ``fault`` and the batch's ``faults``, and the
projections must agree between backends (``conftest``). A body that ignores its signal is
stopped differently — in-process it is abandoned after the grace, on Ray its process or
worker is killed — so that case compares codes and classes only, not ``info.reason``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests import tools
from tests.contract.conftest import SCOPES, WAIT_S, Backend, failure, plain, wait_for_files
from toolray import (
    AbortController,
    LogStep,
    MemoryEventLog,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
)

A = SCOPES[0]

STOPPED = failure(
    "tool call stopped: the batch's deadline of 3s passed",
    "DeadlineExceededError",
    "DEADLINE_EXCEEDED",
)
NOT_STARTED = failure(
    "tool call not started: the batch's deadline of 3s passed",
    "DeadlineExceededError",
    "DEADLINE_EXCEEDED",
)


def _codes(result: object) -> list[tuple[str | None, str | None]]:
    out = []
    for item in result.results:  # type: ignore[attr-defined]
        error = getattr(item.result, "error", None)
        out.append(
            (error.info.code if error and error.info else None, getattr(error, "fault", None))
        )
    return out


async def test_each_way_to_fail_has_the_same_fault_class_everywhere(backend: Backend) -> None:
    names = {k: backend.name(k) for k in ("upper", "fail", "quota", "plain", "bad", "guarded")}
    backend.register(tools.upper_tool(names["upper"], safe=False))
    backend.register(tools.failing_tool(names["fail"], "harness"))
    backend.register(tools.failing_tool(names["quota"], "subclass"))
    backend.register(tools.failing_tool(names["plain"], "plain"))
    backend.register(tools.bad_output_tool(names["bad"]))
    backend.register(tools.echo_tool(names["guarded"]))
    backend.guard(tools.deny_guard(names["guarded"], "not in this scope"))
    calls = [
        ToolCall("c1", names["upper"], '{"text": 1}'),
        ToolCall("c2", backend.name("missing"), "{}"),
        ToolCall("c3", names["fail"], "{}"),
        ToolCall("c4", names["quota"], "{}"),
        ToolCall("c5", names["plain"], "{}"),
        ToolCall("c6", names["bad"], "{}"),
        ToolCall("c7", names["guarded"], "{}"),
        ToolCall("c8", names["upper"], '{"text": "ok"}'),
    ]
    result = await backend.run(calls, A)
    assert _codes(result) == [
        ("INVALID_ARGS", "input"),
        ("UNKNOWN_TOOL", "input"),
        ("ENOSPC", "tool"),  # a tool's own code: the tool's fault
        ("QUOTA_EXCEEDED", "tool"),
        (None, "tool"),  # a body's own exception
        ("INVALID_TOOL_OUTPUT", "tool"),
        (None, "policy"),  # a guard's denial
        (None, None),
    ]
    assert dict(result.faults) == {"input": 2, "policy": 1, "tool": 4, "infra": 0, "cancelled": 0}


async def test_a_deadline_stops_running_calls_and_never_starts_the_rest(
    backend: Backend, tmp_path: Path
) -> None:
    wait, echo, echo_x = backend.name("wait"), backend.name("echo"), backend.name("echo_x")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    backend.register(tools.echo_tool(echo))
    backend.register(tools.echo_tool(echo_x, safe=False))
    calls = [
        ToolCall("c1", wait, '{"key": "k1"}'),
        ToolCall("c2", echo, '{"text": "in time"}'),
        ToolCall("c3", echo_x, '{"text": "never"}'),
        ToolCall("c4", wait, '{"key": "k4"}'),
    ]
    log = MemoryEventLog()
    result = await backend.run(calls, A, log=LogStep(7, 1, log), deadline_s=3)
    wires = [plain(r.result.to_wire()) for r in result.results]
    assert wires[0] == STOPPED  # it ran, cooperatively, until its signal fired
    assert not result.results[1].result.is_error  # it finished in time: its success stands
    assert wires[2:] == [NOT_STARTED, NOT_STARTED]  # after the barrier: never started
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k1.started"]
    assert [r.result.error.fault for r in result.results if r.result.is_error] == ["cancelled"] * 3
    assert result.faults["cancelled"] == 3
    logged = [e["callId"] for e in log.events if e["type"] == "tool/result"]
    assert logged == ["c1", "c2", "c3", "c4"]  # one record pair per call, in model order


async def test_a_deadline_of_zero_runs_nothing(backend: Backend, tmp_path: Path) -> None:
    wait = backend.name("wait")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    calls = [ToolCall("c1", wait, '{"key": "k1"}'), ToolCall("c2", wait, '{"key": "k2"}')]
    result = await backend.run(calls, A, deadline_s=0)
    assert _codes(result) == [("DEADLINE_EXCEEDED", "cancelled")] * 2
    assert list(tmp_path.iterdir()) == []


async def test_an_abort_before_the_deadline_stays_an_abort(
    backend: Backend, tmp_path: Path
) -> None:
    wait = backend.name("wait")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    ctrl = AbortController()
    calls = [ToolCall("c1", wait, '{"key": "k1"}')]
    run = asyncio.ensure_future(backend.run(calls, A, signal=ctrl.signal, deadline_s=30))
    await wait_for_files(tmp_path, ["k1.started"])
    ctrl.abort("the user stopped it")
    result = await run
    assert _codes(result) == [("ABORTED", "cancelled")]


async def test_one_call_with_a_deadline(backend: Backend, tmp_path: Path) -> None:
    wait = backend.name("wait")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    inp = ToolExecutionInput("c1", wait, {"key": "k1"}, AbortController().signal, scope=A)
    result = await asyncio.wait_for(backend._execute_one(inp, deadline_s=0.5), WAIT_S)
    assert result.is_error
    assert (result.error.info.code, result.error.fault) == ("DEADLINE_EXCEEDED", "cancelled")
    backend.agree({"wire": result.to_wire(), "fault": result.error.fault})


async def test_a_body_deaf_to_its_signal_ends_by_the_deadline(backend: Backend) -> None:
    """In-process it is abandoned after the grace, on Ray killed: the same code and class."""
    stubborn, echo = backend.name("stubborn"), backend.name("echo")
    backend.register(tools.stubborn_tool(stubborn, "block"))
    backend.register(tools.echo_tool(echo))
    batch = ToolBatchInput(
        [ToolCall("c1", stubborn, '{"seconds": 5}'), ToolCall("c2", echo, "{}")],
        scope=A,
        deadline_s=2,
    )
    result = await asyncio.wait_for(backend._execute(batch), WAIT_S)
    assert _codes(result) == [("DEADLINE_EXCEEDED", "cancelled"), (None, None)]
    reason = result.results[0].result.error.info.reason  # type: ignore[union-attr]
    assert reason is not None
    assert "abandoned" in reason or "terminated" in reason
