"""Contract: cancellation and timeouts with cooperative bodies.

Bodies are cooperative (they wait on their signal and return), so both backends stop them
at the first rung of the ladder and must agree. An abort mid-batch is driven by events: the
bodies mark a file when they have started (they may run in another process), the test
waits (bounded) for the marks, then aborts the batch's controller.

Not here (deliberately different between backends): bodies that ignore their signal — the
in-process executor waits for them, Ray interrupts or kills the worker and says so in
``info.reason``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests import tools
from tests.contract.conftest import (
    NO_VALUE,
    SCOPES,
    WAIT_S,
    Backend,
    failure,
    plain,
    success,
    values,
    wait_for_files,
    wires,
)
from toolray import AbortController, LogStep, MemoryEventLog, ToolCall

A = SCOPES[0]

ABORTED = failure("tool call aborted", "AbortError", "ABORTED")
BEFORE_DISPATCH = failure(
    "tool call aborted before dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH"
)


def _labels(log: MemoryEventLog) -> list[tuple[str, str]]:
    return [(e["type"], e["callId"]) for e in log.events]


async def test_a_pre_aborted_batch_gets_only_synthetic_aborted_before_dispatch(
    backend: Backend, tmp_path: Path
) -> None:
    wait, echo, echo_x = backend.name("wait"), backend.name("echo"), backend.name("echo_x")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    backend.register(tools.echo_tool(echo))
    backend.register(tools.echo_tool(echo_x, safe=False))
    ctrl = AbortController()
    ctrl.abort("user cancelled")
    calls = [
        ToolCall("c1", wait, '{"key": "k1"}'),
        ToolCall("c2", echo_x, '{"text": "x"}'),
        ToolCall("c3", backend.name("nope"), "{}"),
        ToolCall("c4", echo, "{bad"),
        ToolCall("c5", wait, '{"key": "k5"}'),
    ]
    log = MemoryEventLog()
    result = await backend.run(calls, A, signal=ctrl.signal, log=LogStep(3, 1, log))
    ids = [c.id for c in calls]
    assert wires(result) == [(cid, BEFORE_DISPATCH) for cid in ids]
    assert values(result) == [NO_VALUE] * len(ids)
    assert result.additional_contexts == ()
    assert result.concluded is False
    assert list(tmp_path.iterdir()) == []  # no body ran
    # synthetic pairs, in model order
    assert log.events == [
        event
        for call in calls
        for event in (
            {
                "type": "tool/call",
                "turn": 3,
                "step": 1,
                "callId": call.id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {
                "type": "tool/result",
                "turn": 3,
                "step": 1,
                "callId": call.id,
                "result": BEFORE_DISPATCH,
            },
        )
    ]


async def test_an_abort_mid_batch_stops_started_calls_and_skips_the_rest(
    backend: Backend, tmp_path: Path
) -> None:
    wait, echo, echo_x = backend.name("wait"), backend.name("echo"), backend.name("echo_x")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    backend.register(tools.echo_tool(echo))
    backend.register(tools.echo_tool(echo_x, safe=False))
    calls = [
        ToolCall("c1", wait, '{"key": "k1"}'),
        ToolCall("c2", wait, '{"key": "k2"}'),
        ToolCall("c3", echo_x, '{"text": "x"}'),  # an exclusive barrier: never starts
        ToolCall("c4", echo, '{"text": "y"}'),
    ]
    ctrl = AbortController()
    log = MemoryEventLog()
    task = asyncio.ensure_future(backend.run(calls, A, signal=ctrl.signal, log=LogStep(1, 2, log)))
    try:
        await wait_for_files(tmp_path, ["k1.started", "k2.started"])
    finally:
        ctrl.abort("user cancelled")
    result = await asyncio.wait_for(task, WAIT_S)
    assert wires(result) == [
        ("c1", ABORTED),
        ("c2", ABORTED),
        ("c3", BEFORE_DISPATCH),
        ("c4", BEFORE_DISPATCH),
    ]
    assert values(result) == [NO_VALUE] * 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["k1.started", "k2.started"]
    assert _labels(log) == [
        ("tool/call", "c1"),
        ("tool/call", "c2"),
        ("tool/result", "c1"),
        ("tool/result", "c2"),
        ("tool/call", "c3"),
        ("tool/result", "c3"),
        ("tool/call", "c4"),
        ("tool/result", "c4"),
    ]


async def test_an_abort_during_an_exclusive_call_skips_the_later_ones(
    backend: Backend, tmp_path: Path
) -> None:
    wait_x, echo = backend.name("wait_x"), backend.name("echo")
    backend.register(tools.waiting_tool(wait_x, str(tmp_path), safe=False))
    backend.register(tools.echo_tool(echo))
    calls = [
        ToolCall("c1", echo, '{"text": "first"}'),
        ToolCall("c2", wait_x, '{"key": "k2"}'),
        ToolCall("c3", wait_x, '{"key": "k3"}'),
        ToolCall("c4", echo, '{"text": "last"}'),
    ]
    ctrl = AbortController()
    task = asyncio.ensure_future(backend.run(calls, A, signal=ctrl.signal))
    try:
        await wait_for_files(tmp_path, ["k2.started"])
    finally:
        ctrl.abort("user cancelled")
    result = await asyncio.wait_for(task, WAIT_S)
    assert wires(result) == [
        ("c1", success('{"echo": {"text": "first"}}')),
        ("c2", ABORTED),
        ("c3", BEFORE_DISPATCH),
        ("c4", BEFORE_DISPATCH),
    ]
    assert values(result) == [{"echo": {"text": "first"}}, NO_VALUE, NO_VALUE, NO_VALUE]
    assert [p.name for p in tmp_path.iterdir()] == ["k2.started"]


async def test_a_timeout_on_a_cooperative_body_is_tool_timeout(
    backend: Backend, tmp_path: Path
) -> None:
    backend.install_timeouts()
    slow, quick = backend.name("slow"), backend.name("quick")
    backend.register(tools.waiting_tool(slow, str(tmp_path), timeout_ms=100))
    backend.register(tools.quick_tool(quick, timeout_ms=10_000))
    calls = [
        ToolCall("c1", slow, '{"key": "t1"}'),
        ToolCall("c2", quick, "{}"),
        ToolCall("c3", slow, '{"key": "t3"}'),
    ]
    result = await backend.run(calls, A)
    timed_out = failure("tool call timed out after 100ms", "ToolTimeoutError", "TOOL_TIMEOUT")
    assert wires(result) == [("c1", timed_out), ("c2", success("quick")), ("c3", timed_out)]
    assert values(result) == [NO_VALUE, "quick", NO_VALUE]


async def test_deferred_contexts_survive_an_abort(backend: Backend, tmp_path: Path) -> None:
    wait = backend.name("wait")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    calls = [
        ToolCall("c1", wait, '{"key": "k1", "note": "before the abort"}'),
        ToolCall("c2", wait, '{"key": "k2"}'),
    ]
    ctrl = AbortController()
    task = asyncio.ensure_future(backend.run(calls, A, signal=ctrl.signal))
    try:
        await wait_for_files(tmp_path, ["k1.started", "k2.started"])
    finally:
        ctrl.abort("user cancelled")
    result = await asyncio.wait_for(task, WAIT_S)
    assert wires(result) == [("c1", ABORTED), ("c2", ABORTED)]
    note = {
        "message": {
            "content": [{"type": "text", "text": "before the abort"}],
            "source": wait,
            "meta": None,
        }
    }
    assert plain(result.results[0].result.additional_contexts) == [note]
    assert plain(result.additional_contexts) == [note]
    assert result.concluded is False
