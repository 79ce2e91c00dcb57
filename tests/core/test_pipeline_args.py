"""P-ARGS: input snapshot, argument freeze, execution identity.

Entries without a direct Python meaning (their Python analog is tested where one exists):

- P-ARGS-1 (each input field read exactly once, getters returning new values): a
  ``ToolExecutionInput`` is a frozen dataclass of plain fields; there are no accessors to
  re-read. Analog: the input cannot change, and observers see the values it was built with.
- P-ARGS-5 (an ``arguments`` getter that throws): ``snapshot_json`` checks exact built-in
  types and never runs user code (no properties, no ``__iter__`` of foreign types), so an
  exception raised *while snapshotting* is not possible. Analog: an object with a raising
  property is rejected as non-JSON (the P-ARGS-4 failure) and the property is never read.
- P-ARGS-6 (nested getters read once): same reason. Analog: a caller that mutates its own
  argument object after ``execute()`` started does not change what the pipeline sees.
- P-ARGS-14 (read-only ``AbortSignal`` views, type-level upstream): Python analog — the
  signal is a required argument, and the only writable view (``ToolDispatchExecution``)
  rejects a non-signal value and deletion.
"""

from __future__ import annotations

import dataclasses
import decimal
from typing import Any

import pytest

from toolray import (
    AbortController,
    AbortSignal,
    Allow,
    Ask,
    Cancel,
    Deny,
    ExecutionToken,
    FrozenDict,
    FrozenList,
    ToolExecutionInput,
    ToolRegistry,
)
from toolray.lowlevel import parse_arguments

from ._pipeline_helpers import (
    ARGS_NOT_JSON,
    Probe,
    aborted_signal,
    call,
    error_wire,
    raw_tool,
    stage_counts,
)


def _recording_raw(seen: list[Any]) -> Any:
    async def body(args: Any, ctx: Any) -> str:
        seen.append(args)
        return "ok"

    return raw_tool("raw", body)


async def test_p_args_1_input_is_frozen_and_observed_as_given(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    token_parent = ExecutionToken()
    inp = call(call_id="c-1", scope="agent", parent=token_parent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        inp.call_id = "other"  # type: ignore[misc]
    await reg.execute(inp)
    observed = probe.seen["result"][0]
    assert (observed.call_id, observed.name, observed.scope) == ("c-1", "echo", "agent")
    assert observed.parent is token_parent
    assert observed.signal is inp.signal


async def test_p_args_2_arguments_are_a_detached_deep_frozen_copy() -> None:
    reg = ToolRegistry()
    seen: dict[str, Any] = {}
    caller_args = {"text": "hi", "nested": {"a": [1, 2]}}

    async def pre(execution: Any, next_: Any) -> Any:
        seen["pre"] = execution.arguments
        caller_args["text"] = "changed by caller"  # the caller's object stays its own
        return await next_()

    def guard(execution: Any) -> None:
        seen["guard"] = execution.arguments

    async def body(args: Any, ctx: Any) -> str:
        seen["body"] = args
        return "ok"

    reg.on_pre_execute(pre)
    reg.guard(guard)
    reg.register(raw_tool("raw", body))
    result = await reg.execute(call("raw", caller_args))
    assert not result.is_error
    expected = {"text": "hi", "nested": {"a": [1, 2]}}
    for stage in ("pre", "guard", "body"):
        args = seen[stage]
        assert args == expected, stage
        assert args is not caller_args
        assert type(args) is FrozenDict
        assert type(args["nested"]["a"]) is FrozenList
        with pytest.raises(TypeError):
            args["text"] = "x"
        with pytest.raises(TypeError):
            args["nested"]["a"].append(3)
    caller_args["extra"] = True  # the caller's object is neither frozen nor replaced
    assert caller_args["nested"] == {"a": [1, 2]}


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"k": [value]}
    return value


def _same(left: Any, right: Any) -> bool:
    """Iterative deep equality (``==`` on 10,000 levels would exhaust the C stack)."""
    stack = [(left, right)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                return False
            stack.extend((a[k], b[k]) for k in a)
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))
        elif type(a) is not type(b) or a != b:
            return False
    return True


_shared = {"x": 1}
ACCEPTED = {
    "none": None,
    "bool": True,
    "str": "s",
    "int": 1,
    "bigint": 2**80,
    "float": 1.5,
    "empty-list": [],
    "dict-null": {"a": None},
    "shared-acyclic": {"a": _shared, "b": [_shared]},
    "deep-10000": _deep(10_000),
}


@pytest.mark.parametrize("value", ACCEPTED.values(), ids=[f"P-ARGS-3-{k}" for k in ACCEPTED])
async def test_p_args_3_lossless_arguments_are_accepted(value: Any) -> None:
    reg = ToolRegistry()
    seen: list[Any] = []
    reg.register(_recording_raw(seen))
    result = await reg.execute(call("raw", value))
    assert not result.is_error
    assert _same(seen[0], value)


def _function() -> None:
    return None


class _Custom:
    pass


@dataclasses.dataclass
class _Data:
    a: int = 1


_cycle: dict[str, Any] = {}
_cycle["self"] = _cycle
REJECTED = {
    "nan": float("nan"),
    "inf": float("inf"),
    "-inf": float("-inf"),
    "neg-zero": -0.0,
    "tuple": (1, 2),
    "set": {1},
    "bytes": b"x",
    "decimal": decimal.Decimal("1.5"),
    "dataclass": _Data(),
    "object": _Custom(),
    "function": _function,
    "int-key": {1: "a"},
    "cycle": _cycle,
    "dict-subclass": type("D", (dict,), {})(a=1),
    "nested-set": {"a": [{"b": {2}}]},
}


@pytest.mark.parametrize("value", REJECTED.values(), ids=[f"P-ARGS-3-{k}" for k in REJECTED])
async def test_p_args_3_non_lossless_arguments_are_rejected(value: Any) -> None:
    reg = ToolRegistry()
    seen: list[Any] = []
    reg.register(_recording_raw(seen))
    result = await reg.execute(call("raw", value))
    assert result.to_wire() == error_wire(ARGS_NOT_JSON)
    assert seen == []


@pytest.mark.parametrize(
    "value", [{1, 2}, _function, _Custom()], ids=["P-ARGS-4-set", "P-ARGS-4-fn", "P-ARGS-4-obj"]
)
async def test_p_args_4_non_json_arguments_skip_every_phase(
    reg: ToolRegistry, probe: Probe, value: Any
) -> None:
    probe.register()
    result = await reg.execute(call("echo", {"text": "x", "bad": value}))
    assert result.to_wire() == error_wire(ARGS_NOT_JSON)
    assert result.error.info is None  # type: ignore[union-attr]
    assert probe.stages() == stage_counts(finalize=1, result=1)
    assert probe.seen["result"][0].arguments is None
    assert probe.results[0] is result


async def test_p_args_4_none_is_valid_json_arguments() -> None:
    reg = ToolRegistry()
    seen: list[Any] = []
    reg.register(_recording_raw(seen))
    result = await reg.execute(call("raw", None))
    assert not result.is_error
    assert seen == [None]


async def test_p_args_5_raising_property_is_rejected_without_being_read() -> None:
    reads: list[str] = []

    class Hostile:
        @property
        def value(self) -> Any:
            reads.append("read")
            raise RuntimeError("getter exploded")

    reg = ToolRegistry()
    probe = Probe(reg)
    probe.register()
    result = await reg.execute(call("echo", {"text": "x", "h": Hostile()}))
    assert result.to_wire() == error_wire(ARGS_NOT_JSON)
    assert reads == []
    assert probe.counts["result"] == 1


async def test_p_args_7_argument_failure_beats_a_pre_aborted_signal(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    result = await reg.execute(call("echo", {"bad": {1}}, signal=aborted_signal()))
    assert result.to_wire() == error_wire(ARGS_NOT_JSON)
    assert probe.counts["result"] == 1


async def test_p_args_8_argument_failure_beats_the_code_mode_collapse(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    reg.scope("agent").present_as("code")
    collapsed = await reg.execute(call("echo", {}, scope="agent"))
    assert collapsed.error.info.code == "UNKNOWN_TOOL"  # type: ignore[union-attr]
    result = await reg.execute(call("echo", {"bad": {1}}, scope="agent"))
    assert result.to_wire() == error_wire(ARGS_NOT_JSON)


async def test_p_args_9_one_fresh_token_shared_across_the_pipeline(
    reg: ToolRegistry, probe: Probe
) -> None:
    body_tokens: list[Any] = []

    async def body(args: Any, ctx: Any) -> str:
        body_tokens.append(ctx.token)
        return "ok"

    probe.register("echo", body)
    await reg.execute(call(call_id="a"))
    await reg.execute(call(call_id="b"))
    first, second = (
        [probe.seen[stage][i].token for stage in ("pre", "guard", "around", "post", "result")]
        for i in (0, 1)
    )
    for tokens, body_token in ((first, body_tokens[0]), (second, body_tokens[1])):
        assert isinstance(tokens[0], ExecutionToken)
        assert all(t is tokens[0] for t in tokens)
        assert body_token is tokens[0]
    assert first[0] is not second[0]
    assert first[0].id != second[0].id


@pytest.mark.parametrize(
    ("root", "expected"), [(None, "c1"), ("root-7", "root-7")], ids=["P-ARGS-10-default", "given"]
)
async def test_p_args_10_root_call_id(
    reg: ToolRegistry, probe: Probe, root: str | None, expected: str
) -> None:
    roots: list[str] = []

    async def body(args: Any, ctx: Any) -> str:
        roots.append(ctx.root_call_id)
        return "ok"

    probe.register("echo", body)
    await reg.execute(call(root_call_id=root))
    assert probe.seen["pre"][0].root_call_id == expected
    assert probe.seen["result"][0].root_call_id == expected
    assert roots == [expected]


async def test_p_args_11_one_execution_object_frozen_before_observers(
    reg: ToolRegistry, probe: Probe
) -> None:
    contexts: list[Any] = []
    assignable: dict[str, bool] = {}

    async def body(args: Any, ctx: Any) -> str:
        contexts.append(ctx)
        return "ok"

    async def around(execution: Any, next_: Any) -> Any:
        replacement = AbortController().signal
        previous = execution.signal
        execution.signal = replacement  # the around view may replace the signal
        assignable["around"] = execution.signal is replacement
        execution.signal = previous
        return await next_()

    def observe(execution: Any, result: Any) -> None:
        with pytest.raises(AttributeError):
            execution.signal = AbortController().signal
        with pytest.raises(AttributeError):
            execution.call_id = "other"
        assignable["observer-rejected"] = True

    reg.on_execute(around)
    reg.on_result(observe)
    probe.register("echo", body)
    inp = call(arguments={"text": "x"})
    await reg.execute(inp)
    execution = probe.seen["pre"][0]
    for stage in ("guard", "around", "post", "result"):
        assert probe.seen[stage][0] is execution, stage
    ctx = contexts[0]
    assert ctx.call_id == execution.call_id
    assert ctx.token is execution.token
    assert ctx.arguments == execution.arguments
    assert ctx.signal is inp.signal
    assert type(execution.arguments) is FrozenDict
    assert assignable == {"around": True, "observer-rejected": True}
    with pytest.raises(AttributeError):
        execution.arguments = {}


async def test_p_args_12_optional_keys_absent_when_not_supplied(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    await reg.execute(call())
    execution = probe.seen["pre"][0]
    assert execution.scope is None
    assert execution.parent is None
    assert execution.root_call_id == "c1"


async def test_p_args_13_no_decision_can_rewrite_arguments() -> None:
    for decision in (Allow, Deny, Cancel, Ask):
        assert "arguments" not in {f.name for f in dataclasses.fields(decision)}
    reg = ToolRegistry()
    seen: list[Any] = []

    async def pre(execution: Any, next_: Any) -> Any:
        with pytest.raises(AttributeError):
            execution.arguments = {"text": "rewritten"}
        return await next_()

    reg.on_pre_execute(pre)
    reg.register(_recording_raw(seen))
    result = await reg.execute(call("raw", {"text": "original"}))
    assert not result.is_error
    assert seen == [{"text": "original"}]


async def test_p_args_14_signal_is_required_and_only_replaceable_by_a_signal() -> None:
    with pytest.raises(TypeError):
        ToolExecutionInput("c1", "echo", {})  # type: ignore[call-arg]
    reg = ToolRegistry()
    outcomes: list[str] = []

    async def around(execution: Any, next_: Any) -> Any:
        with pytest.raises(TypeError):
            execution.signal = None
        with pytest.raises((AttributeError, TypeError)):
            del execution.signal
        outcomes.append("checked")
        assert isinstance(execution.signal, AbortSignal)
        return await next_()

    reg.on_execute(around)
    reg.register(raw_tool())
    result = await reg.execute(call("raw"))
    assert not result.is_error
    assert outcomes == ["checked"]


@pytest.mark.parametrize(
    ("text", "parsed"),
    [("", {}), ('{"a": 1}', {"a": 1}), ("[1, 2]", [1, 2]), ("{not json", "{not json")],
    ids=["P-ARGS-15-empty", "P-ARGS-15-object", "P-ARGS-15-array", "P-ARGS-15-invalid"],
)
def test_p_args_15_parse_arguments(text: str, parsed: Any) -> None:
    assert parse_arguments(text) == parsed


async def test_p_args_15_invalid_json_reaches_a_typed_tool_as_invalid_args(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    raw = parse_arguments("{not json")
    result = await reg.execute(call("echo", raw))
    assert result.is_error
    assert result.error.info.code == "INVALID_ARGS"  # type: ignore[union-attr]
    assert probe.counts["body"] == 1  # the raw string is valid JSON and reaches the body
