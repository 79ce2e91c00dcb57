"""``ToolCall`` arguments ("one result per call, whatever happens"; P-ARGS-4/15).

``arguments`` is the model's JSON text or an already parsed ``Mapping`` (Anthropic's
``tool_use.input``). Any other value is accepted at construction and becomes that call's own
``INVALID_ARGS`` failure: the batch goes on, one result per call, in model order. A
mapping's values go through the same lossless-JSON snapshot as parsed text.
"""

from __future__ import annotations

import dataclasses
import math
import pickle
import re
from types import MappingProxyType
from typing import Any

import pytest

from toolray import (
    AbortController,
    JsonlEventLog,
    LogStep,
    MemoryEventLog,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolOutput,
    ToolRegistry,
    define_tool,
    read_jsonl,
    text_block,
)
from toolray.lowlevel import parse_arguments

ARGS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"


def _stable_id(value: object) -> str:
    """A test id that is the same in every process (no object address in it)."""
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def _registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        define_tool(
            name="echo",
            description=None,
            parameters={"text": {"type": "string"}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=lambda args, ctx: args.get("text", ""),
            is_concurrency_safe=lambda args: True,
        )
    )
    return reg


async def _run(
    calls: list[ToolCall], reg: ToolRegistry | None = None, **kw: Any
) -> ToolBatchResult:
    reg = reg if reg is not None else _registry()
    return await reg.execute_batch(ToolBatchInput(calls, AbortController().signal, **kw))


def _code(result: Any) -> str | None:
    info = result.error.info if result.is_error else None
    return info.code if info is not None else None


@pytest.mark.parametrize(
    ("field", "call", "kind"),
    [
        ("id", lambda: ToolCall(1, "x", "{}"), "int"),  # type: ignore[arg-type]
        ("name", lambda: ToolCall("c1", None, "{}"), "NoneType"),  # type: ignore[arg-type]
        ("name", lambda: ToolCall("c1", b"x", "{}"), "bytes"),  # type: ignore[arg-type]
    ],
)
def test_tool_call_id_and_name_must_be_str(field: str, call: Any, kind: str) -> None:
    with pytest.raises(TypeError, match=rf"^ToolCall\.{field} must be a str, not {kind}$"):
        call()


@pytest.mark.parametrize("arguments", [42, None, [1], (1,), b"{}", object()])
def test_any_other_arguments_type_is_accepted_at_construction(arguments: Any) -> None:
    assert ToolCall("c1", "echo", arguments).arguments is arguments


def test_tool_call_is_frozen_and_pickles_with_a_mapping() -> None:
    call = ToolCall("c1", "echo", {"text": "hi", "n": [1, 2]})
    assert pickle.loads(pickle.dumps(call)) == call
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.arguments = "{}"  # type: ignore[misc]


def test_parse_arguments_takes_text_and_mappings() -> None:
    assert parse_arguments({"a": 1}) == {"a": 1}
    parsed = parse_arguments(MappingProxyType({"a": [1]}))
    assert type(parsed) is dict
    assert parsed == {"a": [1]}
    assert parse_arguments(7).error.code == "INVALID_ARGS"


async def test_a_mapping_is_the_parsed_arguments() -> None:
    calls = [
        ToolCall("c1", "echo", {"text": "dict"}),
        ToolCall("c2", "echo", MappingProxyType({"text": "proxy"})),
        ToolCall("c3", "echo", '{"text": "json"}'),
    ]
    out = await _run(calls)
    assert [r.result.value for r in out.results] == ["dict", "proxy", "json"]


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, (1, 2), {1, 2}, object(), b"x"], ids=lambda v: _stable_id(v)
)
async def test_p_args_4_a_non_json_mapping_value_fails_that_call_only(value: Any) -> None:
    calls = [
        ToolCall("c1", "echo", {"text": "before"}),
        ToolCall("c2", "echo", {"text": value}),
        ToolCall("c3", "echo", {"text": "after"}),
    ]
    out = await _run(calls)
    assert [r.call_id for r in out.results] == ["c1", "c2", "c3"]
    first, bad, last = (r.result for r in out.results)
    assert (first.value, last.value) == ("before", "after")
    assert bad.is_error
    assert bad.error.message == ARGS_NOT_JSON
    assert bad.error.info is None  # P-ARGS-4: no info


async def test_p_args_4_a_mapping_with_a_non_str_key_fails_that_call_only() -> None:
    out = await _run([ToolCall("c1", "echo", {1: "x"}), ToolCall("c2", "echo", {})])
    assert out.results[0].result.error.message == ARGS_NOT_JSON
    assert not out.results[1].result.is_error


@pytest.mark.parametrize(
    ("arguments", "kind"), [(42, "int"), (None, "NoneType"), ([1], "list"), (b"{}", "bytes")]
)
async def test_any_other_arguments_type_is_that_calls_invalid_args_failure(
    arguments: Any, kind: str
) -> None:
    seen: list[str] = []
    reg = _registry()
    reg.on_result(lambda execution, result: seen.append(execution.call_id))
    calls = [
        ToolCall("c1", "echo", {"text": "a"}),
        ToolCall("c2", "echo", arguments),
        ToolCall("c3", "echo", '{"text": "b"}'),
    ]
    out = await _run(calls, reg)
    assert [r.call_id for r in out.results] == ["c1", "c2", "c3"]
    bad = out.results[1].result
    assert _code(bad) == "INVALID_ARGS"
    assert bad.error.info.name == "ToolArgsError"
    assert bad.error.message == (
        f"invalid arguments: ToolCall.arguments must be a str (JSON text) or a Mapping, not {kind}"
    )
    assert [r.result.value for r in (out.results[0], out.results[2])] == ["a", "b"]
    assert seen == ["c1", "c2", "c3"]  # every call is observed once, the failed one too


async def test_invalid_arguments_beat_an_aborted_signal() -> None:
    """P-ARGS-7: the arguments failure wins over an already-aborted signal."""
    reg = _registry()
    ctrl = AbortController()
    ctrl.abort()
    from toolray import ToolExecutionInput

    result = await reg.execute(ToolExecutionInput("c1", "echo", parse_arguments(3), ctrl.signal))
    assert _code(result) == "INVALID_ARGS"


async def test_a_mapping_is_logged_as_its_json_text() -> None:
    log = MemoryEventLog()
    calls = [
        ToolCall("c1", "echo", {"text": "é"}),
        ToolCall("c2", "echo", {"text": math.nan}),
        ToolCall("c3", "echo", 42),  # type: ignore[arg-type]
        ToolCall("c4", "echo", '{"text":  "raw"}'),
    ]
    await _run(calls, scope="agent", log=LogStep(1, 1, log))
    logged = [e["arguments"] for e in log.events if e["type"] == "tool/call"]
    assert logged == ['{"text": "é"}', None, None, '{"text":  "raw"}']


async def test_a_jsonl_log_takes_every_kind_of_arguments(tmp_path: Any) -> None:
    path = tmp_path / "log.jsonl"
    calls = [
        ToolCall("c1", "echo", {"text": math.inf}),
        ToolCall("c2", "echo", object()),  # type: ignore[arg-type]
        ToolCall("c3", "echo", {"text": "ok"}),
    ]
    with JsonlEventLog(path) as log:
        out = await _run(calls, scope="agent", log=LogStep(1, 1, log))
    assert len(out.results) == 3
    records = read_jsonl(path)
    assert [r["callId"] for r in records if r["type"] == "tool/call"] == ["c1", "c2", "c3"]
    assert [r["arguments"] for r in records if r["type"] == "tool/call"] == [
        None,
        None,
        '{"text": "ok"}',
    ]
    assert len([r for r in records if r["type"] == "tool/result"]) == 3
