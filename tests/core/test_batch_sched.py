"""B-SCHED: batch scheduling by ``BatchExecutor`` (docs/reference/behaviour.md).

Entries with no direct Python counterpart, and what is kept of them:

- B-SCHED-1: there is no streaming assistant message; the executor only ever receives a
  complete ``ToolBatchInput``. Kept: the batch is the call list captured when the input is
  built, in model order.
- B-SCHED-9 ("every factory-created agent"): there is no agent factory; the counterpart is
  that an executor's cap applies to every scope that batches through it.
- B-SCHED-10: there is no live settings store; a cap is fixed per executor (constructor) or
  per batch (``ToolBatchInput.max_parallel_tool_calls``). Kept: invalid values are refused
  when written; both, and the seed's override rule, are in ``test_batch_errors.py``.
- B-SCHED-17 (steering, "the step reports completed"): no steering or step events exist;
  ``ToolBatchResult.concluded`` carries the conclusion and the contexts queued for the next
  step are returned in ``additional_contexts``; the abort check is the caller's.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray import (
    AbortController,
    ActivationContext,
    BatchExecutor,
    Deny,
    ModelSelection,
    ToolBatchInput,
    ToolCall,
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
    text_block,
)
from toolray.testing import Gate, RecordingTool

from ._batch_helpers import Rig, ctx_msg, keyed_tool, reached, texts

# ---------------------------------------------------------------- B-SCHED-1, 2, 3, 4


async def test_b_sched_1_batch_is_the_complete_call_list_captured_at_input() -> None:
    async with Rig() as rig:
        model_calls = rig.batch("1", "2").calls
        source = [*model_calls]
        batch = ToolBatchInput(source, rig.ctl.signal, scope="agent")
        source.append(ToolCall("c9", "rec", '{"key": "9"}'))
        source[0] = ToolCall("c8", "rec", '{"key": "8"}')
        result = await rig.reg.execute_batch(batch)
    assert [r.call_id for r in result.results] == ["c1", "c2"]
    assert rig.rec.starts == ["1", "2"]


async def test_b_sched_2_each_call_gets_its_own_input_sharing_the_step_signal() -> None:
    async with Rig() as rig:
        seen: list[Any] = []

        async def pre(execution: Any, nxt: Any) -> Any:
            seen.append(execution)
            return await nxt()

        rig.reg.on_pre_execute(pre)
        await rig.run("1", "2", "w3")
    assert [e.call_id for e in seen] == ["c1", "c2", "cw3"]
    assert [e.name for e in seen] == ["rec"] * 3
    assert [e.arguments for e in seen] == [{"key": "1"}, {"key": "2"}, {"key": "w3"}]
    assert all(e.scope == "agent" for e in seen)
    assert all(e.parent is None and e.root_call_id == e.call_id for e in seen)
    assert all(e.signal is rig.ctl.signal for e in seen)
    assert len({id(e) for e in seen}) == 3
    assert len({e.token.id for e in seen}) == 3


async def test_b_sched_2_seed_the_step_tool_set_admits_every_call() -> None:
    async with Rig() as rig:
        rig.tool()
        rig.reg.register(keyed_tool(rig.rec, rig.trace), when=lambda context: True)
        plain = await rig.reg.execute_batch(rig.batch("1", logged=False))
        context = ActivationContext("agent", ModelSelection("p", "m"), rig.ctl.signal)
        with await rig.reg.resolve(context) as tool_set:
            batch = ToolBatchInput(
                rig.batch("2", "3").calls, rig.ctl.signal, scope="agent", tool_set=tool_set
            )
            admitted = await rig.reg.execute_batch(batch)
    assert plain.results[0].result.error.info.code == "UNKNOWN_TOOL"  # type: ignore[union-attr]
    assert [r.result.is_error for r in admitted.results] == [False, False]
    assert rig.rec.starts == ["2", "3"]


def _classifier_variants() -> list[Any]:
    def throws(args: Any) -> bool:
        raise RuntimeError("classifier broke")

    return [
        pytest.param(None, id="B-SCHED-3-missing"),
        pytest.param(lambda a: False, id="B-SCHED-3-false"),
        pytest.param(lambda a: "yes", id="B-SCHED-3-truthy-str"),
        pytest.param(lambda a: 1, id="B-SCHED-3-truthy-int"),
        pytest.param(throws, id="B-SCHED-3-throws"),
    ]


@pytest.mark.parametrize("classifier", _classifier_variants())
async def test_b_sched_3_anything_but_exactly_true_runs_exclusive(classifier: Any) -> None:
    rec = RecordingTool(name="x", gates={"1": Gate()})
    reg = ToolRegistry()
    reg.register(rec.definition(is_concurrency_safe=classifier))
    batch = ToolBatchInput(
        [ToolCall("c1", "x", '{"key": "1"}'), ToolCall("c2", "x", '{"key": "2"}')],
        AbortController().signal,
    )
    task = asyncio.ensure_future(reg.execute_batch(batch))
    await reached(rec.started_gate("1"))
    rec.gates["1"].open()
    result = await task
    assert rec.events == ["start:1", "end:1", "start:2", "end:2"]
    assert rec.max_running == 1
    assert [r.result.is_error for r in result.results] == [False, False]


async def test_b_sched_3_true_classifier_runs_parallel() -> None:
    async with Rig(gated=["1", "2"]) as rig:
        task = rig.start("1", "2")
        await rig.started("1", "2")
        rig.open("1", "2")
        await task
    assert rig.rec.max_running == 2


@pytest.mark.parametrize("case", ["unknown", "hidden", "invalid-typed-args"])
async def test_b_sched_3_unknown_hidden_or_invalid_calls_are_barriers(case: str) -> None:
    async with Rig(gated=["1"]) as rig:
        seen: list[Any] = []
        rig.tool()
        rig.reg.register(
            keyed_tool(rig.rec, rig.trace, safe=lambda k: seen.append(k) is None)  # type: ignore[func-returns-value]
        )
        middle = ToolCall("cm", "rec", '{"key": 5}')
        if case == "unknown":
            middle = ToolCall("cm", "nope", '{"key": "m"}')
        elif case == "hidden":
            rig.reg.register(keyed_tool(RecordingTool(name="hid"), name="hid"))
            rig.reg.scope("agent").restrict(deny=["hid"])
            middle = ToolCall("cm", "hid", '{"key": "m"}')
        first, last = rig.batch("1", "2").calls
        batch = ToolBatchInput([first, middle, last], rig.ctl.signal, scope="agent")
        task = asyncio.ensure_future(rig.reg.execute_batch(batch))
        await rig.started("1")
        rig.open("1")
        result = await task
    assert rig.rec.events == ["start:1", "end:1", "start:2", "end:2"]
    assert result.results[1].result.is_error
    assert 5 not in seen  # the classifier never sees invalid typed arguments


async def test_b_sched_3_raw_classifier_receives_the_parsed_arguments() -> None:
    seen: list[Any] = []
    reg = ToolRegistry()
    reg.register(
        ToolDefinition(
            name="raw",
            description=None,
            parameters={"type": "object"},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=lambda args, ctx: "ok",
            is_concurrency_safe=lambda args: seen.append(args) is None,
        )
    )
    batch = ToolBatchInput(
        [ToolCall("c1", "raw", '{"n": [1, 2]}'), ToolCall("c2", "raw", "not json")],
        AbortController().signal,
    )
    await reg.execute_batch(batch)
    assert {"n": [1, 2]} in seen
    assert "not json" in seen


def test_b_sched_4_describe_never_exposes_concurrency_or_timeout() -> None:
    reg = ToolRegistry()
    definition = RecordingTool().definition(timeout_ms=50)
    model_input = BatchExecutor(reg).describe([definition])
    assert [set(s) for s in model_input.schemas] == [{"name", "description", "parameters"}]
    flat = repr(model_input.schemas)
    for word in ("concurrency", "Concurrency", "timeout", "Timeout"):
        assert word not in flat
    assert model_input.known_names == ["rec"]


# ---------------------------------------------------------------- B-SCHED-5, 6, 7, 8, 9


async def test_b_sched_5_exclusive_call_between_parallel_calls_forms_three_groups() -> None:
    async with Rig() as rig:
        await rig.run("A1", "wA2", "A3")
    assert rig.rec.events == ["start:A1", "end:A1", "start:wA2", "end:wA2", "start:A3", "end:A3"]


async def test_b_sched_5_parallel_group_admits_calls_until_the_next_exclusive() -> None:
    async with Rig(gated=["1", "2", "4", "5"]) as rig:
        task = rig.start("1", "2", "w3", "4", "5")
        await rig.started("1", "2")
        rig.open("1", "2")
        await rig.started("4", "5")
        rig.open("4", "5")
        await task
    events = rig.rec.events
    assert events.index("start:w3") > max(events.index("end:1"), events.index("end:2"))
    assert events.index("end:w3") < min(events.index("start:4"), events.index("start:5"))
    assert rig.rec.max_running == 2


async def test_b_sched_6_parallel_siblings_all_start_before_any_completes() -> None:
    async with Rig(gated=["1", "2", "3"]) as rig:
        task = rig.start("1", "2", "3")
        await rig.started("1", "2", "3")
        assert rig.rec.starts == ["1", "2", "3"]
        assert not any(e.startswith("end:") for e in rig.rec.events)
        rig.open("1", "2", "3")
        await task


async def test_b_sched_7_default_cap_is_ten() -> None:
    keys = [str(i) for i in range(12)]
    async with Rig(gated=keys) as rig:
        assert BatchExecutor(rig.reg).max_parallel_tool_calls == 10
        task = rig.start(*keys)
        await rig.started(*keys[:10])
        assert rig.rec.starts == keys[:10]
        rig.open(*keys)
        await task
    assert rig.rec.max_running == 10


async def test_b_sched_7_a_settled_call_awaiting_its_commit_frees_its_slot() -> None:
    async with Rig(gated=["1", "3"]) as rig:
        task = rig.start("1", "2", "3", cap=2)
        await rig.started("3")  # 2 settled behind the running 1: its slot went to 3
        assert "tool/result:c2" not in rig.trace.items
        rig.open("1", "3")
        await task


async def test_b_sched_7_a_call_denied_in_prepare_holds_no_slot() -> None:
    async with Rig(gated=["1", "3"]) as rig:
        rig.reg.on_pre_execute(lambda e, nxt: Deny("no") if e.call_id == "c2" else nxt())
        task = rig.start("1", "2", "3", cap=2)
        await rig.started("1", "3")
        rig.open("1", "3")
        result = await task
    assert "2" not in rig.rec.starts
    assert result.results[1].result.is_error


async def test_b_sched_8_the_pool_rolls_as_calls_settle() -> None:
    async with Rig(gated=["1", "2", "3", "4"]) as rig:
        task = rig.start("1", "2", "3", "4", cap=2)
        await rig.started("1", "2")
        assert rig.rec.starts == ["1", "2"]
        rig.open("1")
        await rig.started("3")
        assert rig.rec.starts == ["1", "2", "3"]
        assert rig.log.labels()[:4] == [
            "tool/call:c1",
            "tool/call:c2",
            "tool/result:c1",
            "tool/call:c3",
        ]
        rig.open("2", "3", "4")
        result = await task
    assert [r.call_id for r in result.results] == ["c1", "c2", "c3", "c4"]
    assert rig.rec.max_running == 2


async def test_b_sched_9_cap_one_is_fully_serial_for_every_scope() -> None:
    async with Rig() as rig:
        executor = BatchExecutor(rig.reg, max_parallel_tool_calls=1)
        rig.reg.set_executor(executor)
        for scope in ("agent", "other"):
            batch = ToolBatchInput(rig.batch("1", "2", "3").calls, rig.ctl.signal, scope=scope)
            await rig.reg.execute_batch(batch)
    assert rig.rec.max_running == 1
    assert rig.rec.events[:4] == ["start:1", "end:1", "start:2", "end:2"]


# ---------------------------------------------------------------- B-SCHED-11, 12


async def test_b_sched_11_each_start_appends_tool_call_then_prepares_in_model_order() -> None:
    async with Rig() as rig:
        held = Gate()

        async def slow_pre(execution: Any, nxt: Any) -> Any:
            if execution.call_id == "c1":
                await held.wait()
            return await nxt()

        rig.reg.on_pre_execute(slow_pre)
        task = rig.start("1", "2", "3")
        await rig.trace.reached("pre:c1")
        assert rig.log.labels() == ["tool/call:c1"]
        assert "pre:c2" not in rig.trace.items
        held.open()
        await task
    assert rig.trace.only("tool/call", "pre") == [
        "tool/call:c1", "pre:c1", "tool/call:c2", "pre:c2", "tool/call:c3", "pre:c3",
    ]  # fmt: skip


async def test_b_sched_11_prepare_never_overlaps_another_prepare_or_a_commit() -> None:
    async with Rig() as rig:
        held = Gate()

        async def slow_pre(execution: Any, nxt: Any) -> Any:
            rig.trace.add(f"pre-enter:{execution.call_id}")
            if execution.call_id == "c2":
                await held.wait()
            rig.trace.add(f"pre-exit:{execution.call_id}")
            return await nxt()

        rig.reg.on_pre_execute(slow_pre)
        task = rig.start("1", "2", "3")
        await rig.trace.reached("settle:c1")  # c1 settled while c2 is still preparing
        assert "post:c1" not in rig.trace.items
        assert "tool/result:c1" not in rig.trace.items
        held.open()
        await task
    assert rig.trace.before("pre-exit:c2", "post:c1")
    preparing: str | None = None
    for label in rig.trace.only("pre-enter", "pre-exit", "post", "observe", "tool/result"):
        kind, cid = label.split(":")
        if kind == "pre-enter":
            assert preparing is None, f"{cid} prepared while {preparing} was preparing"
            preparing = cid
        elif kind == "pre-exit":
            preparing = None
        else:
            assert preparing is None, f"{label} committed while {preparing} was preparing"


async def test_b_sched_12_commits_run_in_model_order_whatever_the_settle_order() -> None:
    async with Rig(gated=["1", "2", "3"]) as rig:
        task = rig.start("1", "2", "3")
        await rig.started("1", "2", "3")
        rig.open("3")
        await rig.trace.reached("settle:c3")
        rig.open("2")
        await rig.trace.reached("settle:c2")
        assert rig.trace.of("post") == []
        rig.open("1")
        await task
    assert rig.trace.of("post") == ["c1", "c2", "c3"]
    assert rig.trace.only("post", "observe", "tool/result") == [
        f"{kind}:{cid}" for cid in ("c1", "c2", "c3") for kind in ("post", "observe", "tool/result")
    ]


# ---------------------------------------------------------------- B-SCHED-13, 14


async def test_b_sched_13_result_observer_making_the_next_call_exclusive_stops_replenishing() -> (
    None
):
    async with Rig(gated=["1", "2", "3"]) as rig:
        starts_at_commit: dict[str, list[str]] = {}

        def swap(execution: Any, result: Any) -> None:
            starts_at_commit[execution.call_id] = list(rig.rec.starts)
            if execution.call_id == "c1":
                rig.tool()
                rig.reg.register(keyed_tool(rig.rec, rig.trace, safe=lambda k: False))

        rig.reg.on_result(swap)
        task = rig.start("1", "2", "3", "4", cap=2)
        await rig.started("1", "2")
        rig.open("1")
        await rig.trace.reached("observe:c1")
        assert "3" not in rig.rec.starts
        rig.open("2")
        await rig.started("3")
        rig.open("3")
        await task
    assert "3" not in starts_at_commit["c2"]  # c3 started only after c2 committed
    events = rig.rec.events
    assert events.index("end:3") < events.index("start:4")


async def test_b_sched_13_barrier_swapping_the_tool_serializes_later_calls() -> None:
    async with Rig() as rig:

        def swap(ctx: Any) -> None:
            rig.tool()
            rig.reg.register(keyed_tool(rig.rec, rig.trace, safe=lambda k: False))

        rig.tool()
        rig.tool = rig.reg.register(keyed_tool(rig.rec, rig.trace, before={"w0": swap}))
        await rig.run("w0", "1", "2", "3")
    assert rig.rec.events == [f"{e}:{k}" for k in ("w0", "1", "2", "3") for e in ("start", "end")]


async def test_b_sched_14_exclusive_barrier_lasts_through_its_commit() -> None:
    async with Rig() as rig:
        held = Gate()

        async def slow_post(execution: Any, result: Any, nxt: Any) -> Any:
            if execution.call_id == "cw1":
                await held.wait()
            return await nxt()

        rig.reg.on_post_execute(slow_post)
        task = rig.start("w1", "2", "3")
        await rig.trace.reached("post:cw1")
        assert "dispatch:c2" not in rig.trace.items
        held.open()
        await task
    assert rig.trace.before("observe:cw1", "pre:c2")
    assert rig.trace.before("tool/result:cw1", "tool/call:c2")


async def test_b_sched_14_parallel_group_commits_fully_before_the_next_exclusive() -> None:
    async with Rig() as rig:
        held = Gate()

        async def slow_post(execution: Any, result: Any, nxt: Any) -> Any:
            if execution.call_id == "c2":
                await held.wait()
            return await nxt()

        rig.reg.on_post_execute(slow_post)
        task = rig.start("1", "2", "w3")
        await rig.trace.reached("post:c2")
        assert "tool/call:cw3" not in rig.trace.items
        held.open()
        await task
    assert rig.trace.before("tool/result:c1", "tool/call:cw3")
    assert rig.trace.before("tool/result:c2", "tool/call:cw3")


# ---------------------------------------------------------------- B-SCHED-15 .. 18


async def test_b_sched_15_prepare_denials_and_errors_commit_in_order_without_dispatch() -> None:
    async with Rig() as rig:

        def pre(execution: Any, nxt: Any) -> Any:
            if execution.call_id == "c2":
                return Deny("blocked by policy")
            if execution.call_id == "c3":
                raise RuntimeError("pre exploded")
            return nxt()

        rig.reg.on_pre_execute(pre)
        result = await rig.run("1", "2", "3")
    assert rig.rec.starts == ["1"]
    assert rig.trace.of("post") == ["c1", "c2"]
    assert [r.call_id for r in result.results] == ["c1", "c2", "c3"]
    assert not result.results[0].result.is_error
    assert "blocked by policy" in result.results[1].result.content[0]["text"]
    assert "pre exploded" in result.results[2].result.content[0]["text"]


async def test_b_sched_16_a_slow_commit_holds_later_starts_but_not_running_bodies() -> None:
    async with Rig(gated=["2"]) as rig:
        held = Gate()

        async def slow_post(execution: Any, result: Any, nxt: Any) -> Any:
            if execution.call_id == "c1":
                await held.wait()
            return await nxt()

        rig.reg.on_post_execute(slow_post)
        task = rig.start("1", "2", "3", cap=2)
        await rig.trace.reached("post:c1")
        rig.open("2")
        await rig.trace.reached("end:2")  # a body in flight keeps running
        assert "tool/call:c3" not in rig.trace.items
        assert "pre:c3" not in rig.trace.items
        held.open()
        await task
    assert rig.trace.before("tool/result:c1", "tool/call:c3")


async def test_b_sched_17_conclusion_waits_for_the_whole_batch_and_keeps_contexts() -> None:
    def conclude(ctx: Any) -> None:
        ctx.defer_context(ctx_msg("ctx-c1"))
        ctx.conclude_turn()

    async with Rig(
        before={"1": conclude, "2": lambda c: c.defer_context(ctx_msg("ctx-c2"))}
    ) as rig:
        result = await rig.run("1", "2", "w3")
    assert result.concluded is True
    assert result.results[0].result.concludes_turn is True
    assert sorted(rig.rec.starts) == ["1", "2", "w3"]
    assert all(not r.result.is_error for r in result.results)
    assert texts(result.additional_contexts) == ["ctx-c1", "ctx-c2"]


async def test_b_sched_17_no_conclusion_without_a_concluding_success() -> None:
    async with Rig(fail={"2"}) as rig:
        result = await rig.run("1", "2")
    assert result.concluded is False


async def test_b_sched_17_abort_after_a_conclusion_is_visible_to_the_caller() -> None:
    async with Rig(before={"1": lambda c: c.conclude_turn()}) as rig:
        rig.before["2"] = lambda c: rig.ctl.abort()
        result = await rig.run("1", "2", "3", cap=1)
    assert result.results[0].result.concludes_turn is True
    assert result.concluded is True
    assert rig.ctl.signal.aborted  # the caller ends the turn aborted: abort has priority
    assert result.results[2].result.error.info.code == "ABORTED_BEFORE_DISPATCH"  # type: ignore[union-attr]


async def test_b_sched_18_code_mode_collapses_a_model_direct_call() -> None:
    async with Rig(mode="code") as rig:
        result = await rig.run("1")
    assert rig.rec.starts == []
    outcome = result.results[0].result
    assert outcome.error.info.code == "UNKNOWN_TOOL"  # type: ignore[union-attr]
    wire = rig.log.events[-1]["result"]
    assert wire["error"]["info"] == {"name": "ToolNotFoundError", "code": "UNKNOWN_TOOL"}
