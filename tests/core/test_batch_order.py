"""B-ORDER: ordering of results, durable records and contexts.

Python mapping: the session events are the ``log`` sink's ``tool/call`` and ``tool/result``
dicts; the next-step inbox is ``ToolBatchResult.additional_contexts``.

- B-ORDER-3: there are no ``user/message`` events; contexts never enter the durable log and
  are handed back only with the settled batch, i.e. after every ``tool/result`` append.
- B-ORDER-6: ``message: toolResultMessage(...)`` and ``sourceEventSeqs`` have no counterpart:
  the Python record is ``{"type", "turn", "step", "callId", "result": result.to_wire()}`` and
  pairs with its ``tool/call`` by ``callId``. Kept: the exact shape, and that
  ``value`` and ``additionalContexts`` are never stored.

P-ARGS-15 lives here too: the durable ``tool/call`` keeps the raw text while the pipeline
receives the parsed value.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from toolray import (
    Accept,
    LogStep,
    MemoryEventLog,
    ToolBatchInput,
    ToolCall,
    ToolOutput,
    text_block,
)
from toolray.lowlevel import parse_arguments

from ._batch_helpers import Rig, ctx_msg, keyed_tool, texts


async def test_b_order_1_results_commit_in_model_order_even_when_later_settles_first() -> None:
    async with Rig(gated=["1", "2"]) as rig:
        task = rig.start("1", "2")
        await rig.started("1", "2")
        rig.open("2")
        await rig.trace.reached("settle:c2")
        assert [e for e in rig.log.events if e["type"] == "tool/result"] == []
        rig.open("1")
        result = await task
    assert rig.trace.of("tool/result") == ["c1", "c2"]
    assert [r.call_id for r in result.results] == ["c1", "c2"]


async def test_b_order_2_tool_calls_are_appended_at_start_and_interleave_with_results() -> None:
    async with Rig(gated=["1", "2", "3"]) as rig:
        task = rig.start("1", "2", "3", cap=2)
        await rig.started("1", "2")
        rig.open("1")
        await rig.started("3")
        rig.open("2", "3")
        result = await task
    assert rig.log.labels() == [
        "tool/call:c1",
        "tool/call:c2",
        "tool/result:c1",
        "tool/call:c3",
        "tool/result:c2",
        "tool/result:c3",
    ]
    assert [r.call_id for r in result.results] == ["c1", "c2", "c3"]


async def test_b_order_3_contexts_are_accepted_in_model_order_after_all_results() -> None:
    before = {k: (lambda c, k=k: c.defer_context(ctx_msg(f"ctx-c{k}"))) for k in ("1", "2")}
    async with Rig(gated=["1", "2"], before=before) as rig:
        task = rig.start("1", "2")
        await rig.started("1", "2")
        rig.open("2")
        await rig.trace.reached("settle:c2")
        rig.open("1")
        result = await task
    assert texts(result.additional_contexts) == ["ctx-c1", "ctx-c2"]
    assert {e["type"] for e in rig.log.events} == {"tool/call", "tool/result"}
    assert rig.trace.before("tool/result:c2", "returned")


async def test_b_order_4_deferred_then_wrapper_then_post_contexts() -> None:
    def defer(ctx: Any) -> None:
        ctx.defer_context(ctx_msg(f"deferred-1-{ctx.call_id}"))
        ctx.defer_context(ctx_msg(f"deferred-2-{ctx.call_id}"))
        ctx.defer_context(ctx_msg(f"deferred-3-{ctx.call_id}"))

    async with Rig(before={"1": defer, "2": defer}) as rig:

        async def wrapper(execution: Any, nxt: Any) -> Any:
            result = await nxt()
            extra = (*result.additional_contexts, ctx_msg(f"wrapper-{execution.call_id}"))
            return dataclasses.replace(result, additional_contexts=extra)

        async def post(execution: Any, result: Any, nxt: Any) -> Any:
            return Accept(additional_contexts=[ctx_msg(f"post-{execution.call_id}")])

        rig.reg.on_execute(wrapper)
        rig.reg.on_post_execute(post)
        result = await rig.run("1", "2")
    expected = {
        cid: [
            f"deferred-1-{cid}",
            f"deferred-2-{cid}",
            f"deferred-3-{cid}",
            f"wrapper-{cid}",
            f"post-{cid}",
        ]
        for cid in ("c1", "c2")
    }
    assert [texts(r.result.additional_contexts) for r in result.results] == list(expected.values())
    assert texts(result.additional_contexts) == expected["c1"] + expected["c2"]


async def test_b_order_5_result_observer_runs_before_the_durable_result() -> None:
    async with Rig() as rig:
        at_observe: dict[str, list[str]] = {}

        def observer(execution: Any, result: Any) -> None:
            at_observe[execution.call_id] = rig.log.labels()

        rig.reg.on_result(observer)
        await rig.run("1", "2")
    assert "tool/call:c1" in at_observe["c1"]
    assert "tool/result:c1" not in at_observe["c1"]
    assert "tool/result:c2" not in at_observe["c2"]
    assert rig.trace.only("post", "observe", "tool/result")[:3] == [
        "post:c1",
        "observe:c1",
        "tool/result:c1",
    ]


async def test_b_order_6_durable_records_have_the_pinned_shape() -> None:
    async with Rig() as rig:
        rig.tool()
        rig.reg.register(
            keyed_tool(
                rig.rec,
                before={"1": lambda c: c.defer_context(ctx_msg("ctx"))},
                output=_output_with_meta(),
            )
        )
        sink = MemoryEventLog()
        batch = ToolBatchInput(
            [ToolCall("c1", "rec", '{"key": "1"}'), ToolCall("c2", "rec", '{"key": 2}')],
            rig.ctl.signal,
            scope="agent",
            log=LogStep(3, 4, sink),
        )
        result = await rig.reg.execute_batch(batch)
    ok, bad = (r.result for r in result.results)
    assert sink.events == [
        {
            "type": "tool/call",
            "turn": 3,
            "step": 4,
            "callId": "c1",
            "name": "rec",
            "arguments": '{"key": "1"}',
        },
        {"type": "tool/result", "turn": 3, "step": 4, "callId": "c1", "result": ok.to_wire()},
        {
            "type": "tool/call",
            "turn": 3,
            "step": 4,
            "callId": "c2",
            "name": "rec",
            "arguments": '{"key": 2}',
        },
        {"type": "tool/result", "turn": 3, "step": 4, "callId": "c2", "result": bad.to_wire()},
    ]
    assert sink.events[1]["result"] == {
        "isError": False,
        "content": [{"type": "text", "text": "1"}],
        "meta": {"len": 1},
    }
    assert sink.events[3]["result"]["error"]["info"] == {
        "name": "ToolArgsError",
        "code": "INVALID_ARGS",
    }
    dumped = json.dumps(sink.events)
    assert "value" not in dumped
    assert "additionalContexts" not in dumped
    assert "ctx" not in dumped


def _output_with_meta() -> Any:
    return ToolOutput(
        schema={"type": "string"},
        render=lambda args, value: [text_block(value)],
        presentation_meta=lambda args, value: {"len": len(value)},
    )


# ---------------------------------------------------------------- P-ARGS-15


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        pytest.param("", {}, id="P-ARGS-15-empty"),
        pytest.param('{"key": "1"}', {"key": "1"}, id="P-ARGS-15-object"),
        pytest.param("[1, 2]", [1, 2], id="P-ARGS-15-array"),
        pytest.param("{not json", "{not json", id="P-ARGS-15-invalid"),
        pytest.param("NaN", "NaN", id="P-ARGS-15-nan-is-not-json"),
        pytest.param('{"key": Infinity}', '{"key": Infinity}', id="P-ARGS-15-infinity-is-not-json"),
    ],
)
async def test_p_args_15_batch_parses_arguments_text(text: str, parsed: Any) -> None:
    assert parse_arguments(text) == parsed
    async with Rig() as rig:
        seen: list[Any] = []

        async def pre(execution: Any, nxt: Any) -> Any:
            seen.append(execution.arguments)
            return await nxt()

        rig.reg.on_pre_execute(pre)
        batch = ToolBatchInput([ToolCall("c1", "rec", text)], rig.ctl.signal)
        result = await rig.reg.execute_batch(batch)
    assert seen == [parsed]
    if parsed != {"key": "1"}:  # the typed tool then refuses it with INVALID_ARGS
        assert result.results[0].result.error.info.code == "INVALID_ARGS"  # type: ignore[union-attr]


async def test_execute_fills_a_trace_with_spans_and_stage_instants() -> None:
    """The trace behind `toolray trace` and the demo's timelines (in-process)."""
    from toolray import AbortController, BatchExecutor, ToolBatchInput, ToolCall, ToolRegistry
    from toolray.testing import RecordingTool

    registry = ToolRegistry()
    registry.register(RecordingTool(name="safe_rec").definition())
    registry.register(RecordingTool(name="excl_rec", safe=False).definition())
    calls = [
        ToolCall("a", "safe_rec", '{"key": "a"}'),
        ToolCall("b", "safe_rec", '{"key": "b"}'),
        ToolCall("w", "excl_rec", '{"key": "w"}'),
        ToolCall("x", "nope", "{}"),
    ]
    trace: list[dict] = []
    await BatchExecutor(registry).execute(
        ToolBatchInput(calls, AbortController().signal), trace=trace
    )
    spans = [e for e in trace if e["type"] == "call"]
    assert [s["callId"] for s in spans] == ["a", "b", "w", "x"]
    assert [s["mode"] for s in spans] == ["parallel", "parallel", "exclusive", "exclusive"]
    assert all(s["started"] <= s["committed"] for s in spans)
    assert spans[3]["code"] == "UNKNOWN_TOOL"
    stages = [(e["kind"], e["start"]) for e in trace if e["type"] == "stage"]
    assert stages == [("parallel", 0), ("exclusive", 2), ("exclusive", 3)]
