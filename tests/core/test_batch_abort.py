"""B-ABORT: aborting a batch (the seed's ToolExecutor text).

Python mapping: "the turn ends aborted" is what the caller reads from the settled
``ToolBatchResult`` (every call has an outcome, unstarted ones synthetic
``ABORTED_BEFORE_DISPATCH``) and from the step signal (``aborted``, ``reason``); "parked"
contexts are the ``additional_contexts`` of that result.

- B-ABORT-5: there are no ``step/end`` / ``turn/end`` events. Kept: every ``tool/result``
  (synthetic ones included) is appended before ``execute`` returns, committed contexts are
  returned, and the cancel cause stays on the signal for the caller's ``turn/end``.
- B-ABORT-8: there is no owning agent to dispose, and no turns or wakeups. The disposal is
  the step signal aborting with reason ``{"kind": "disposed"}``; "no new turn opens" is the
  agent loop's business. Kept: the body sees the abort, its result is ``ABORTED``, the
  post-execute context is returned, and the reason is preserved.
"""

from __future__ import annotations

from typing import Any

from toolray import Accept

from ._batch_helpers import (
    ABORTED_BEFORE_DISPATCH_WIRE,
    Rig,
    code_of,
    codes,
    ctx_msg,
    keyed_tool,
    texts,
)


def _post_context(rig: Rig) -> None:
    async def post(execution: Any, result: Any, nxt: Any) -> Any:
        await nxt()
        return Accept(additional_contexts=[ctx_msg(f"post-{execution.call_id}")])

    rig.reg.on_post_execute(post)


async def test_b_abort_1_pre_aborted_batch_gets_only_synthetic_pairs() -> None:
    finalized: list[str] = []
    classified: list[str] = []
    async with Rig() as rig:
        rig.tool()
        rig.reg.register(
            keyed_tool(
                rig.rec,
                rig.trace,
                safe=lambda key: classified.append(key) is None,
                finalize_content=lambda e, r: finalized.append(e.call_id),
            )
        )
        rig.ctl.abort({"kind": "user"})
        result = await rig.run("1", "w2", "3")
    assert codes(result) == [(c, "ABORTED_BEFORE_DISPATCH") for c in ("c1", "cw2", "c3")]
    assert result.results[0].result.content[0]["text"] == "Error: tool call aborted before dispatch"
    assert rig.log.labels() == [
        f"{kind}:{cid}" for cid in ("c1", "cw2", "c3") for kind in ("tool/call", "tool/result")
    ]
    assert all(
        e["result"] == ABORTED_BEFORE_DISPATCH_WIRE
        for e in rig.log.events
        if e["type"] == "tool/result"
    )
    assert rig.trace.only("pre", "dispatch", "post", "observe") == []
    assert finalized == []
    assert classified == []  # the registry is not called at all
    assert rig.rec.starts == []


async def test_b_abort_1_abort_between_groups_skips_the_next_group_untouched() -> None:
    async with Rig() as rig:

        def observer(execution: Any, result: Any) -> None:
            if execution.call_id == "cw1":
                rig.ctl.abort()

        rig.reg.on_result(observer)
        result = await rig.run("w1", "2", "3")
    assert codes(result) == [
        ("cw1", "ok"),
        ("c2", "ABORTED_BEFORE_DISPATCH"),
        ("c3", "ABORTED_BEFORE_DISPATCH"),
    ]
    assert rig.trace.of("pre") == ["cw1"]
    assert rig.trace.of("observe") == ["cw1"]
    assert rig.log.labels()[2:] == [
        "tool/call:c2",
        "tool/result:c2",
        "tool/call:c3",
        "tool/result:c3",
    ]


async def test_b_abort_2_abort_during_ordered_pre_execute() -> None:
    async with Rig() as rig:
        post_codes: list[tuple[str, str]] = []

        async def pre(execution: Any, nxt: Any) -> Any:
            if execution.call_id == "c1":
                rig.ctl.abort()
            return await nxt()

        async def post(execution: Any, result: Any, nxt: Any) -> Any:
            post_codes.append((execution.call_id, code_of(result)))
            return await nxt()

        rig.reg.on_pre_execute(pre)
        rig.reg.on_post_execute(post)
        result = await rig.run("1", "2", "3")
    assert codes(result) == [(c, "ABORTED_BEFORE_DISPATCH") for c in ("c1", "c2", "c3")]
    assert post_codes == [("c1", "ABORTED_BEFORE_DISPATCH")]
    assert rig.trace.of("observe") == ["c1"]
    assert rig.trace.of("pre") == ["c1"]
    assert rig.rec.starts == []


async def test_b_abort_3_abort_in_flight_drains_commits_and_parks_contexts() -> None:
    before = {k: (lambda c, k=k: c.defer_context(ctx_msg(f"ctx-c{k}"))) for k in "1234"}
    async with Rig(gated=["1", "2"], before=before) as rig:
        task = rig.start("1", "2", "3", "4", cap=2)
        await rig.started("1", "2")
        rig.ctl.abort({"kind": "user"})
        rig.open("1")
        await rig.trace.reached("tool/result:c1")
        assert not task.done()
        assert "tool/call:c3" not in rig.trace.items
        rig.open("2")
        result = await task
    assert codes(result) == [
        ("c1", "ABORTED"),
        ("c2", "ABORTED"),
        ("c3", "ABORTED_BEFORE_DISPATCH"),
        ("c4", "ABORTED_BEFORE_DISPATCH"),
    ]
    assert rig.rec.starts == ["1", "2"]
    assert texts(result.additional_contexts) == ["ctx-c1", "ctx-c2"]
    assert rig.trace.before("end:2", "tool/call:c3")
    assert rig.trace.before("end:2", "returned")
    assert rig.log.labels()[-4:] == [
        "tool/call:c3",
        "tool/result:c3",
        "tool/call:c4",
        "tool/result:c4",
    ]


async def test_b_abort_4_exclusive_after_an_aborted_parallel_group_never_runs() -> None:
    async with Rig() as rig:
        rig.before["1"] = lambda c: rig.ctl.abort()
        result = await rig.run("1", "2", "w3")
    assert "w3" not in rig.rec.starts
    assert "cw3" not in rig.trace.of("pre")
    assert code_of(result.results[2].result) == "ABORTED_BEFORE_DISPATCH"
    assert code_of(result.results[0].result) == "ABORTED"
    assert rig.log.events[-1]["result"] == ABORTED_BEFORE_DISPATCH_WIRE


async def test_b_abort_5_all_results_land_before_return_and_context_is_recorded() -> None:
    reason = {"kind": "user"}
    async with Rig() as rig:
        _post_context(rig)
        rig.before["2"] = lambda c: rig.ctl.abort(reason)
        result = await rig.run("1", "2", "3", cap=1)
    assert codes(result) == [("c1", "ok"), ("c2", "ABORTED"), ("c3", "ABORTED_BEFORE_DISPATCH")]
    assert texts(result.additional_contexts) == ["post-c1", "post-c2"]
    assert rig.trace.of("tool/result") == ["c1", "c2", "c3"]
    assert rig.trace.before("tool/result:c3", "returned")
    assert rig.ctl.signal.reason is reason


async def test_b_abort_6_abort_is_noticed_only_at_checkpoints() -> None:
    seen: list[Any] = []

    async def wait_for_abort(ctx: Any) -> None:
        await ctx.signal.wait()
        seen.append(ctx.signal.reason)

    async with Rig(gated=["1"], before={"2": wait_for_abort}) as rig:
        task = rig.start("1", "2", "3", cap=2)
        await rig.trace.reached("body:1")
        await rig.trace.reached("body:2")
        assert rig.log.labels() == ["tool/call:c1", "tool/call:c2"]
        rig.ctl.abort("stop")
        await rig.trace.reached("settle:c2")
        rig.open("1")
        result = await task
    assert seen == ["stop"]  # the body learned of the abort through its signal
    assert "3" not in rig.rec.starts
    assert codes(result)[2] == ("c3", "ABORTED_BEFORE_DISPATCH")
    assert rig.trace.before("tool/result:c2", "tool/call:c3")


async def test_b_abort_7_self_cancelling_body_gets_aborted_and_keeps_post_context() -> None:
    async with Rig() as rig:
        _post_context(rig)
        rig.before["1"] = lambda c: rig.ctl.abort()
        result = await rig.run("1")
    outcome = result.results[0].result
    assert code_of(outcome) == "ABORTED"
    assert texts(outcome.additional_contexts) == ["post-c1"]
    assert texts(result.additional_contexts) == ["post-c1"]


async def test_b_abort_8_disposal_while_a_body_waits_on_its_signal() -> None:
    disposed = {"kind": "disposed"}
    seen: list[Any] = []

    async def wait_for_abort(ctx: Any) -> None:
        await ctx.signal.wait()
        seen.append(ctx.signal.reason)

    async with Rig(before={"1": wait_for_abort}) as rig:
        _post_context(rig)
        task = rig.start("1", "2", cap=1)
        await rig.trace.reached("body:1")
        rig.ctl.abort(disposed)
        result = await task
    assert seen == [disposed]
    assert codes(result) == [("c1", "ABORTED"), ("c2", "ABORTED_BEFORE_DISPATCH")]
    assert texts(result.additional_contexts) == ["post-c1"]
    assert result.concluded is False
    assert rig.ctl.signal.reason is disposed


async def test_seed_one_outcome_per_call_in_input_order_including_skipped() -> None:
    async with Rig() as rig:
        rig.before["w2"] = lambda c: rig.ctl.abort()
        result = await rig.run("1", "w2", "3", "w4", "5")
    assert [r.call_id for r in result.results] == ["c1", "cw2", "c3", "cw4", "c5"]
    assert [code_of(r.result) for r in result.results] == [
        "ok",
        "ABORTED",
        "ABORTED_BEFORE_DISPATCH",
        "ABORTED_BEFORE_DISPATCH",
        "ABORTED_BEFORE_DISPATCH",
    ]
