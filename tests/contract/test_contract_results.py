"""Contract: results of a settled batch — order, arguments, body errors, output, contexts.

The same scenarios run in-process (``ToolRegistry`` + ``BatchExecutor``) and on Ray
(``rt.executor(scope).execute_batch``); each asserts the spec'd results exactly, and the
``backend`` fixture checks that both backends produce identical projections.

Deliberately NOT identical between backends, and so not in this suite: a body that
ignores its signal (in-process the batch waits for it, P-TIME-9; on Ray the worker is
interrupted or killed and the result carries ``info.reason``), a body that kills its
process (``WORKER_LOST`` exists only on Ray), ``tool_set`` batches (in-process only),
placement, worker ids and timings in traces, process ids, and identity of returned
objects (Ray results are copies).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests import tools
from tests.contract.conftest import (
    NO_VALUE,
    SCOPES,
    Backend,
    failure,
    plain,
    success,
    values,
    wires,
)
from toolray import ToolCall

A = SCOPES[0]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _register_mixed(backend: Backend) -> dict[str, str]:
    names = {
        "echo": backend.name("echo"),
        "echo_x": backend.name("echo_x"),
        "upper": backend.name("upper"),
        "upper_x": backend.name("upper_x"),
    }
    backend.register(tools.echo_tool(names["echo"], safe=True))
    backend.register(tools.echo_tool(names["echo_x"], safe=False))
    backend.register(tools.upper_tool(names["upper"], safe=True))
    backend.register(tools.upper_tool(names["upper_x"], safe=False))
    return names


MIXED = [  # (call id, tool key, text): safe and exclusive, async and sync bodies
    ("c1", "echo", "a"),
    ("c2", "upper", "b"),
    ("c3", "echo_x", "c"),
    ("c4", "upper", "d"),
    ("c5", "echo", "e"),
    ("c6", "upper_x", "f"),
    ("c7", "echo", "g"),
]


def _mixed_expectation() -> tuple[list[tuple[str, Any]], list[Any]]:
    expected_wires: list[tuple[str, Any]] = []
    expected_values: list[Any] = []
    for cid, key, txt in MIXED:
        value: Any = {"echo": {"text": txt}} if key.startswith("echo") else txt.upper()
        expected_values.append(value)
        expected_wires.append((cid, success(_json(value) if isinstance(value, dict) else value)))
    return expected_wires, expected_values


async def test_one_result_per_call_in_model_order_for_a_mixed_batch(backend: Backend) -> None:
    names = _register_mixed(backend)
    calls = [ToolCall(cid, names[key], _json({"text": txt})) for cid, key, txt in MIXED]
    expected_wires, expected_values = _mixed_expectation()
    for cap in (None, 2, 1):
        result = await backend.run(calls, A, cap=cap)
        assert wires(result) == expected_wires, f"cap={cap}"
        assert values(result) == expected_values, f"cap={cap}"
        assert result.additional_contexts == ()
        assert result.concluded is False


async def test_an_empty_batch_settles_with_no_results(backend: Backend) -> None:
    result = await backend.run([], A)
    assert result.results == ()
    assert result.additional_contexts == ()
    assert result.concluded is False


async def test_unknown_tool_is_a_result_and_the_batch_goes_on(backend: Backend) -> None:
    echo = backend.name("echo")
    backend.register(tools.echo_tool(echo))
    nope = backend.name("nope")
    result = await backend.run(
        [ToolCall("c1", nope, "{}"), ToolCall("c2", echo, '{"text": "after"}')], A
    )
    assert wires(result) == [
        ("c1", failure(f'unknown tool "{nope}"', "ToolNotFoundError", "UNKNOWN_TOOL")),
        ("c2", success('{"echo": {"text": "after"}}')),
    ]
    assert values(result) == [NO_VALUE, {"echo": {"text": "after"}}]


async def test_parsed_arguments_that_are_not_json_fail_their_call_and_the_batch_goes_on(
    backend: Backend,
) -> None:
    # on Ray a lock cannot even cross to the executor: its call still gets its own result
    raw = backend.name("raw")
    backend.register(tools.raw_echo_tool(raw))
    not_json = failure("tool execution arguments must be losslessly JSON-serializable")
    calls = [
        ToolCall("c1", raw, {"lock": threading.Lock()}),
        ToolCall("c2", raw, {"n": 1}),
        ToolCall("c3", raw, {"x": float("nan")}),
    ]
    result = await backend.run(calls, A)
    assert wires(result) == [
        ("c1", not_json),
        ("c2", success('{"received": {"n": 1}}')),
        ("c3", not_json),
    ]
    assert values(result) == [NO_VALUE, {"received": {"n": 1}}, NO_VALUE]
    assert wires(await backend.run(calls[:1], A)) == [("c1", not_json)]  # a one-call batch


async def test_two_calls_with_one_id_are_refused_and_nothing_runs(backend: Backend) -> None:
    """A result is matched to its call by id: a batch that reuses one is misuse."""
    echo = backend.name("echo")
    backend.register(tools.echo_tool(echo))
    calls = [ToolCall(i, echo, '{"text": "x"}') for i in ("c1", "c2", "c1")]
    with pytest.raises(
        ValueError, match=r'call id "c1" is used twice in one batch \(calls 1 and 3\)'
    ):
        await backend.run(calls, A)
    result = await backend.run(calls[:2], A)  # the executor is fine and runs the next batch
    assert [w[0] for w in wires(result)] == ["c1", "c2"]


async def test_argument_text_parsing_and_validation(backend: Backend) -> None:
    echo, raw, upper = backend.name("echo"), backend.name("raw"), backend.name("upper")
    backend.register(tools.echo_tool(echo))
    backend.register(tools.raw_echo_tool(raw))
    backend.register(tools.upper_tool(upper))
    not_object = failure(
        'invalid arguments: "arguments" must be an object', "ToolArgsError", "INVALID_ARGS"
    )
    malformed = failure(
        'invalid arguments: "arguments" is not valid JSON: Expecting value at line 1, '
        "column 10 (char 9)",
        "ToolArgsError",
        "INVALID_ARGS",
    )
    malformed_2 = failure(
        "invalid arguments: \"arguments\" is not valid JSON: Expecting ':' delimiter at "
        "line 2, column 5 (char 13)",
        "ToolArgsError",
        "INVALID_ARGS",
    )
    cases: list[tuple[str, str, Any, Any]] = [  # (tool, raw text, expected wire, value)
        (echo, '{"text": ', malformed, NO_VALUE),  # invalid JSON → raw string → INVALID_ARGS
        (echo, '{"a": 1,\n "b"}', malformed_2, NO_VALUE),  # says where, on any line
        (raw, "{bad json", success('{"received": "{bad json"}'), {"received": "{bad json"}),
        (echo, "", success('{"echo": {}}'), {"echo": {}}),  # "" → {}
        (raw, "", success('{"received": {}}'), {"received": {}}),
        (echo, "[1, 2]", not_object, NO_VALUE),
        (echo, "42", not_object, NO_VALUE),
        (echo, "null", not_object, NO_VALUE),
        (echo, '"text"', not_object, NO_VALUE),
        (raw, "[1, 2]", success('{"received": [1, 2]}'), {"received": [1, 2]}),
        (
            echo,
            '{"text": 5}',
            failure('invalid arguments: "text" must be a string', "ToolArgsError", "INVALID_ARGS"),
            NO_VALUE,
        ),
        (
            upper,
            "{}",
            failure(
                'invalid arguments: missing required property "text"',
                "ToolArgsError",
                "INVALID_ARGS",
            ),
            NO_VALUE,
        ),
        (echo, '{"text": "ok"}', success('{"echo": {"text": "ok"}}'), {"echo": {"text": "ok"}}),
    ]
    calls = [ToolCall(f"c{i}", name, text) for i, (name, text, _, _) in enumerate(cases)]
    result = await backend.run(calls, A)
    assert wires(result) == [(f"c{i}", wire) for i, (_, _, wire, _) in enumerate(cases)]
    assert values(result) == [value for *_, value in cases]


async def test_body_errors_and_output_contract_violations(backend: Backend) -> None:
    harness, quota, plain_err = (backend.name(n) for n in ("harness", "quota", "plain"))
    bad, echo = backend.name("bad"), backend.name("echo")
    backend.register(tools.failing_tool(harness, "harness"))
    backend.register(tools.failing_tool(quota, "subclass"))
    backend.register(tools.failing_tool(plain_err, "plain"))
    backend.register(tools.bad_output_tool(bad))
    backend.register(tools.echo_tool(echo))
    calls = [
        ToolCall("c1", harness, "{}"),
        ToolCall("c2", quota, "{}"),
        ToolCall("c3", plain_err, "{}"),
        ToolCall("c4", bad, "{}"),
        ToolCall("c5", echo, '{"text": "still runs"}'),
    ]
    result = await backend.run(calls, A)
    assert wires(result) == [
        ("c1", failure("disk full", "HarnessError", "ENOSPC")),
        ("c2", failure("quota exceeded for today", "QuotaError", "QUOTA_EXCEEDED")),
        ("c3", failure("plain failure")),
        (
            "c4",
            failure(
                f'tool "{bad}" returned invalid output: "value" must be a string',
                "ToolOutputError",
                "INVALID_TOOL_OUTPUT",
            ),
        ),
        ("c5", success('{"echo": {"text": "still runs"}}')),
    ]
    assert values(result) == [NO_VALUE] * 4 + [{"echo": {"text": "still runs"}}]


def _message(note: str, source: str) -> dict[str, Any]:
    return {
        "message": {
            "content": [{"type": "text", "text": note}],
            "source": source,
            "meta": {"note": note},
        }
    }


async def test_deferred_contexts_in_fifo_order_and_conclude_turn(backend: Backend) -> None:
    notes, notes_x, fail = backend.name("notes"), backend.name("notes_x"), backend.name("fail")
    backend.register(tools.context_tool(notes, safe=True))
    backend.register(tools.context_tool(notes_x, safe=False))
    backend.register(tools.failing_tool(fail, "harness", defer="b1"))
    calls = [
        ToolCall("c1", notes, '{"notes": ["a1", "a2"]}'),
        ToolCall("c2", fail, "{}"),
        ToolCall("c3", notes_x, '{"notes": ["c1"], "conclude": true}'),
        ToolCall("c4", notes, '{"notes": []}'),
        ToolCall("c5", notes, '{"notes": ["e1"]}'),
    ]
    result = await backend.run(calls, A)
    assert wires(result) == [
        ("c1", success("noted")),
        ("c2", failure("disk full", "HarnessError", "ENOSPC")),
        ("c3", success("noted")),
        ("c4", success("noted")),
        ("c5", success("noted")),
    ]
    per_call = [plain(r.result.additional_contexts) for r in result.results]
    assert per_call == [
        [_message("a1", notes), _message("a2", notes)],
        [{"message": {"content": [{"type": "text", "text": "b1"}], "source": fail, "meta": None}}],
        [_message("c1", notes_x)],
        [],
        [_message("e1", notes)],
    ]
    assert [r.result.concludes_turn for r in result.results] == [False, False, True, False, False]
    assert plain(result.additional_contexts) == [m for ms in per_call for m in ms]
    assert result.concluded is True

    quiet = await backend.run([ToolCall("d1", notes, '{"notes": ["x"]}')], A)
    assert plain(quiet.additional_contexts) == [_message("x", notes)]
    assert quiet.concluded is False


async def test_body_contexts_come_before_post_execute_contexts(backend: Backend) -> None:
    notes = backend.name("notes")
    backend.register(tools.context_tool(notes))
    backend.on_post_execute(tools.post_note(notes, "from post"))
    result = await backend.run(
        [ToolCall("c1", notes, '{"notes": ["b1", "b2"]}'), ToolCall("c2", notes, "{}")], A
    )
    post = {
        "message": {
            "content": [{"type": "text", "text": "from post"}],
            "source": "post",
            "meta": None,
        }
    }
    assert wires(result) == [("c1", success("noted")), ("c2", success("noted"))]
    assert plain(result.additional_contexts) == [
        _message("b1", notes),
        _message("b2", notes),
        post,
        post,
    ]
