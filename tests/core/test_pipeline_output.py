"""P-OUT: output validation, render and presentation meta.

Entries without a direct Python meaning:

- P-OUT-4 (a getter that throws inside the returned value): ``snapshot_json`` never runs
  user code, so there is no "value snapshot failed" path. Analog: a returned object with a
  raising property is ``value is not lossless JSON`` and the property is never read.
- P-OUT-6, second half (a getter that throws inside *projected* data): same reason; the
  non-lossless half is tested.

Python mapping: "no ``value`` key" means the result is a ``ToolExecutionFailure`` (which has
no ``value`` attribute); "``meta`` absent" means ``meta is None`` and no ``"meta"`` key in
``to_wire()``. Texts keep their wording (``output.presentationMeta failed: …``).
"""

from __future__ import annotations

from typing import Any

import pytest

from toolray import (
    AbortController,
    Block,
    FrozenDict,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolOutput,
    ToolRegistry,
    text_block,
)
from toolray.schema import validate_json_schema_value

from ._pipeline_helpers import Probe, call, make_tool

INVALID = ("ToolOutputError", "INVALID_TOOL_OUTPUT")
INVALID_INFO = ToolErrorInfo(*INVALID)


def _returning(value: Any) -> Any:
    async def body(args: Any, ctx: Any) -> Any:
        return value

    return body


def _invalid(name: str, *violations: str) -> str:
    return f'tool "{name}" returned invalid output: ' + "; ".join(violations)


async def test_p_out_1_success_path_order_and_frozen_value() -> None:
    trace: list[Any] = []

    def render(args: Any, value: Any) -> list[Any]:
        trace.append(("render", dict(args), type(value).__name__))
        return [text_block(value["a"])]

    def meta(args: Any, value: Any) -> Any:
        trace.append(("meta", dict(args), type(value).__name__))
        return {"m": value["a"]}

    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
        "additionalProperties": False,
    }
    out = ToolOutput(schema=schema, render=render, presentation_meta=meta)
    reg = ToolRegistry()
    probe = Probe(reg)

    async def body(args: Any, ctx: Any) -> Any:
        return {"a": "x"} if args.get("text") == "ok" else {"a": 1, "b": "y"}

    probe.register("shape", body, output=out)
    ok = await reg.execute(call("shape", {"text": "ok"}))
    assert trace == [
        ("render", {"text": "ok"}, "FrozenDict"),
        ("meta", {"text": "ok"}, "FrozenDict"),
    ]
    assert type(ok.value) is FrozenDict
    assert ok.meta == {"m": "x"}
    trace.clear()
    bad = await reg.execute(call("shape", {"text": "bad"}))
    compiled = reg.get("shape").output.schema  # type: ignore[union-attr]
    violations = validate_json_schema_value(compiled, {"a": 1, "b": "y"})
    assert len(violations) == 2
    assert bad.error.message == _invalid("shape", *violations)  # type: ignore[union-attr]
    assert bad.error.info == INVALID_INFO  # type: ignore[union-attr]
    assert trace == []  # an invalid value is never rendered


async def test_p_out_2_non_lossless_value() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _returning(lambda: None)))
    result = await reg.execute(call())
    assert "not lossless JSON" in result.content[0]["text"]
    assert result.error.message == _invalid("echo", "value is not lossless JSON")  # type: ignore[union-attr]
    assert result.error.info == INVALID_INFO  # type: ignore[union-attr]


async def test_p_out_3_schema_mismatch() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo", _returning(42)))
    result = await reg.execute(call())
    assert '"value" must be a string' in result.content[0]["text"]
    assert result.error.info == INVALID_INFO  # type: ignore[union-attr]


async def test_p_out_4_object_with_raising_property_is_not_lossless_and_not_read() -> None:
    reads: list[str] = []

    class Hostile:
        @property
        def value(self) -> Any:
            reads.append("read")
            raise RuntimeError("body snapshot getter exploded")

    reg = ToolRegistry()
    reg.register(make_tool("echo", _returning({"h": Hostile()})))
    result = await reg.execute(call())
    assert result.error.message == _invalid("echo", "value is not lossless JSON")  # type: ignore[union-attr]
    assert reads == []


def _raise(message: str) -> Any:
    def projector(args: Any, value: Any) -> Any:
        raise ValueError(message)

    return projector


@pytest.mark.parametrize(
    ("output", "violation"),
    [
        (
            ToolOutput(schema={"type": "string"}, render=_raise("render broke")),
            "output.render failed: render broke",
        ),
        (
            ToolOutput(
                schema={"type": "string"},
                render=lambda a, v: [text_block(v)],
                presentation_meta=_raise("meta broke"),
            ),
            "output.presentationMeta failed: meta broke",
        ),
    ],
    ids=["P-OUT-5-render", "P-OUT-5-presentationMeta"],
)
async def test_p_out_5_throwing_projector_is_one_failed_call(
    reg: ToolRegistry, probe: Probe, output: Any, violation: str
) -> None:
    probe.register("echo", output=output)
    result = await reg.execute(call())
    assert isinstance(result, ToolExecutionFailure)
    assert not hasattr(result, "value")
    assert result.error.message == _invalid("echo", violation)
    assert result.error.info == INVALID_INFO
    assert probe.counts["result"] == 1


@pytest.mark.parametrize(
    ("output", "violation"),
    [
        (
            ToolOutput(schema={"type": "string"}, render=lambda a, v: [{"type": "text", "x": {1}}]),
            "output.render returned non-lossless JSON",
        ),
        (
            ToolOutput(
                schema={"type": "string"},
                render=lambda a, v: [text_block(v)],
                presentation_meta=lambda a, v: lambda: None,
            ),
            "output.presentationMeta returned non-lossless JSON",
        ),
    ],
    ids=["P-OUT-6-render", "P-OUT-6-presentationMeta"],
)
async def test_p_out_6_non_lossless_projection(
    reg: ToolRegistry, probe: Probe, output: Any, violation: str
) -> None:
    probe.register("echo", output=output)
    result = await reg.execute(call())
    assert result.is_error
    assert result.content[0]["text"].startswith("Error:")
    assert result.error.message == _invalid("echo", violation)  # type: ignore[union-attr]
    assert result.error.info == INVALID_INFO  # type: ignore[union-attr]
    assert probe.results[0].is_error


async def test_p_out_7_meta_only_for_top_level_calls_with_a_projector() -> None:
    reg = ToolRegistry()
    with_meta = ToolOutput(
        schema={"type": "string"},
        render=lambda a, v: [text_block(v)],
        presentation_meta=lambda a, v: {"projected": v},
    )
    reg.register(make_tool("projected", output=with_meta))
    reg.register(make_tool("plain"))
    nested: list[Any] = []

    async def composite(args: Any, ctx: Any) -> str:
        inner = await reg.execute(
            call("projected", {"text": "n"}, signal=ctx.signal, parent=ctx.token)
        )
        nested.append(inner)
        return "outer"

    reg.register(make_tool("composite", composite))
    top = await reg.execute(call("projected", {"text": "t"}))
    assert top.meta == {"projected": "t"}
    assert top.to_wire()["meta"] == {"projected": "t"}
    plain = await reg.execute(call("plain", {"text": "t"}))
    assert plain.meta is None
    assert "meta" not in plain.to_wire()
    await reg.execute(call("composite"))
    assert nested[0].meta is None
    assert "meta" not in nested[0].to_wire()


async def test_p_out_8_invalid_output_flows_through_post_and_finalize(
    reg: ToolRegistry, probe: Probe
) -> None:
    finalized: list[Any] = []

    def truncate(execution: Any, result: Any) -> list[Any]:
        finalized.append(result)
        return [text_block(result.content[0]["text"][:32])]

    throwing_meta = ToolOutput(
        schema={"type": "string"},
        render=lambda a, v: [text_block(v)],
        presentation_meta=_raise("meta exploded"),
    )
    probe.register("throwing-meta", output=throwing_meta, finalize_content=truncate)
    result = await reg.execute(call("throwing-meta"))
    assert probe.counts["post"] == 1
    assert probe.post_results[0].error.info == INVALID_INFO
    assert len(finalized) == 1
    text = result.content[0]["text"]
    assert len(text) == 32
    assert text.startswith('Error: tool "throwing-meta"')
    assert result.error.info == INVALID_INFO  # type: ignore[union-attr]


async def test_p_out_9_invalid_output_beats_cancellation() -> None:
    reg = ToolRegistry()
    caller = AbortController()

    async def body(args: Any, ctx: Any) -> Any:
        caller.abort("user")
        return 42

    reg.register(make_tool("echo", body))
    result = await reg.execute(call(signal=caller.signal))
    assert result.error.info == INVALID_INFO  # type: ignore[union-attr]


async def test_p_out_10_result_shapes(reg: ToolRegistry, probe: Probe) -> None:
    probe.register()
    ok = await reg.execute(call(arguments={"text": "hi"}))
    assert ok.to_wire() == {"isError": False, "content": [text_block("hi")]}
    assert ok.value == "hi"
    assert ok.is_error is False
    assert not hasattr(ok, "error")
    assert probe.results[0] is ok

    async def block(execution: Any, result: Any, next_: Any) -> Any:
        return Block([text_block("no")])

    reg.on_post_execute(block)
    failed = await reg.execute(call(arguments={"text": "hi"}))
    assert isinstance(failed, ToolExecutionFailure)
    assert not hasattr(failed, "value")
    assert failed.to_wire() == {
        "isError": True,
        "content": [text_block("no")],
        "error": {"message": "no"},
    }


def test_p_out_11_registration_requires_an_output_contract() -> None:
    reg = ToolRegistry()

    async def body(args: Any, ctx: Any) -> str:
        return "x"

    definition = ToolDefinition(
        name="bare",
        description="no output",
        parameters={"type": "object"},
        output=None,  # type: ignore[arg-type]
        execute=body,
    )
    with pytest.raises(TypeError) as info:
        reg.register(definition)
    assert "must declare output { schema, render, presentation_meta? }" in str(info.value)
