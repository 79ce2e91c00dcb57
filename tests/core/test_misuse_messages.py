"""The messages of the three slips a new user makes first (R-REG-01, P-ARGS-15, B-SCHED-1).

The same texts on Ray are checked by the contract suite (``tests/contract``).
"""

from __future__ import annotations

import pytest

from toolray import ToolBatchInput, ToolCall, ToolRegistry, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _texts(*arguments: str) -> list[str]:
    registry = ToolRegistry()
    registry.register(add)
    calls = [ToolCall(f"c{i}", "add", text) for i, text in enumerate(arguments)]
    result = registry.execute_batch_sync(ToolBatchInput(calls))
    return [r.result.content[0]["text"] for r in result.results]


def test_malformed_json_says_so_and_where() -> None:
    texts = _texts('{"a": 1, "b": }', '{\n  "a": 1\n  "b": 2\n}', "[1, 2")
    assert texts == [
        'Error: invalid arguments: "arguments" is not valid JSON: Expecting value at line 1, '
        "column 15 (char 14)",
        "Error: invalid arguments: \"arguments\" is not valid JSON: Expecting ',' delimiter at "
        "line 3, column 3 (char 13)",
        "Error: invalid arguments: \"arguments\" is not valid JSON: Expecting ',' delimiter at "
        "line 1, column 6 (char 5)",
    ]


def test_valid_json_that_is_not_an_object_keeps_the_plain_message() -> None:
    plain = 'Error: invalid arguments: "arguments" must be an object'
    assert _texts("[1, 2]", "42", '"text"', "null") == [plain] * 4


def test_a_schema_violation_in_valid_json_is_not_called_malformed() -> None:
    (text,) = _texts('{"a": "x", "b": 2}')
    assert "not valid JSON" not in text
    assert '"a" must be an integer' in text


def test_registering_a_plain_function_suggests_the_decorator() -> None:
    def shout(text: str) -> str:
        return text.upper()

    registry = ToolRegistry()
    with pytest.raises(TypeError) as info:
        registry.register(shout)  # type: ignore[arg-type]
    assert str(info.value) == (
        'register() takes a ToolDefinition, not function "shout"; decorate it with @tool '
        "(from toolray import tool)"
    )
    with pytest.raises(TypeError, match=r"^register\(\) takes a ToolDefinition, not int$"):
        registry.register(3)  # type: ignore[arg-type]
    registry.register(tool(shout))  # what the message says to do works
    assert [s["name"] for s in registry.schemas()] == ["shout"]


def test_a_batch_refuses_a_call_id_used_twice() -> None:
    calls = [ToolCall("c1", "add", "{}"), ToolCall("c2", "add", "{}"), ToolCall("c2", "add", "{}")]
    with pytest.raises(ValueError) as info:
        ToolBatchInput(calls)
    assert str(info.value) == (
        'call id "c2" is used twice in one batch (calls 2 and 3); each call needs an id of its '
        "own, as its result is matched to it by id"
    )
    assert len(ToolBatchInput(calls[:2]).calls) == 2
