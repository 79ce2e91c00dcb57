"""Contract: the durable event log of a batch (``tool/call`` / ``tool/result``).

Every call here is exclusive, so each call's pair is appended before the next call starts
and the whole sequence is determined; both backends must append exactly the same events.
(With parallel groups the interleaving of ``tool/call`` and ``tool/result`` inside a group
is legitimately timing-dependent, B-ORDER-2, so it is not compared event by event.)
"""

from __future__ import annotations

from typing import Any

from tests import tools
from tests.contract.conftest import SCOPES, Backend, failure, plain, success, wires
from toolray import LogStep, MemoryEventLog, ToolCall

A = SCOPES[0]


def _pairs(calls: list[ToolCall], wires_: list[tuple[str, Any]], turn: int, step: int) -> list[Any]:
    results = dict(wires_)
    return [
        event
        for call in calls
        for event in (
            {
                "type": "tool/call",
                "turn": turn,
                "step": step,
                "callId": call.id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {
                "type": "tool/result",
                "turn": turn,
                "step": step,
                "callId": call.id,
                "result": results[call.id],
            },
        )
    ]


async def test_an_all_exclusive_batch_logs_call_result_pairs_in_model_order(
    backend: Backend,
) -> None:
    echo_x, upper_x = backend.name("echo_x"), backend.name("upper_x")
    notes_x, nope = backend.name("notes_x"), backend.name("nope")
    backend.register(tools.echo_tool(echo_x, safe=False))
    backend.register(tools.upper_tool(upper_x, safe=False))
    backend.register(tools.context_tool(notes_x, safe=False))
    calls = [
        ToolCall("c1", echo_x, '{"text": "x"}'),
        ToolCall("c2", nope, '{"q": 1}'),  # unknown: exclusive (fail-closed)
        ToolCall("c3", upper_x, "{}"),
        ToolCall("c4", notes_x, '{"notes": ["n1"]}'),
        ToolCall("c5", echo_x, ""),
        ToolCall("c6", echo_x, "{not json"),
    ]
    log = MemoryEventLog()
    result = await backend.run(calls, A, log=LogStep(7, 2, log))
    expected = [
        ("c1", success('{"echo": {"text": "x"}}')),
        ("c2", failure(f'unknown tool "{nope}"', "ToolNotFoundError", "UNKNOWN_TOOL")),
        (
            "c3",
            failure(
                'invalid arguments: missing required property "text"',
                "ToolArgsError",
                "INVALID_ARGS",
            ),
        ),
        ("c4", success("noted")),
        ("c5", success('{"echo": {}}')),
        (
            "c6",
            failure(
                'invalid arguments: "arguments" is not valid JSON: Expecting property name '
                "enclosed in double quotes at line 1, column 2 (char 1)",
                "ToolArgsError",
                "INVALID_ARGS",
            ),
        ),
    ]
    assert wires(result) == expected
    assert [(e["type"], e["callId"]) for e in log.events] == [
        (kind, c.id) for c in calls for kind in ("tool/call", "tool/result")
    ]
    assert plain(log.events) == _pairs(calls, expected, 7, 2)


async def test_consecutive_batches_append_to_the_same_sink(backend: Backend) -> None:
    echo_x = backend.name("echo_x")
    backend.register(tools.echo_tool(echo_x, safe=False))
    log = MemoryEventLog()
    first = [ToolCall("a1", echo_x, '{"text": "1"}'), ToolCall("a2", echo_x, '{"text": "2"}')]
    second = [ToolCall("b1", echo_x, '{"text": "3"}')]
    await backend.run(first, A, log=LogStep(1, 1, log))
    await backend.run(second, A, log=LogStep(1, 2, log))
    assert plain(log.events) == _pairs(
        first,
        [("a1", success('{"echo": {"text": "1"}}')), ("a2", success('{"echo": {"text": "2"}}'))],
        1,
        1,
    ) + _pairs(second, [("b1", success('{"echo": {"text": "3"}}'))], 1, 2)
