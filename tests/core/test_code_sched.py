"""C-CODE-6/7 and R-REG-23: one ``run_code`` program's sub-calls on the scheduler's open lane.

Calls start in submission order, reclassified at each start; parallel calls overlap up to
``max_parallel_sub_calls``; an exclusive call runs alone and holds its barrier through its
commit; outcomes reach the program at commit time, in submission order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from toolray import AbortSignal, Accept, ToolRegistry, UserMessage, text_block
from toolray.code import CodeRunOutcome

from ._code_helpers import Gated, Watch, code_registry, events, log_step, outcome, run_code

pytestmark = pytest.mark.asyncio


# ---------------------------------------------------------------- R-REG-23
def test_r_reg_23_defaults_to_native_and_a_cap_of_ten() -> None:
    reg = ToolRegistry()
    assert reg.mode == "native"
    assert reg.max_parallel_sub_calls == 10
    assert reg.code_runtime is None
    assert reg.get("run_code") is None


@pytest.mark.parametrize("cap", [0, -1, 1.5, True, "2", None])
def test_r_reg_23_a_non_positive_cap_is_rejected(cap: Any) -> None:
    with pytest.raises(ValueError, match=r"^max_parallel_sub_calls must be a positive integer$"):
        ToolRegistry(mode="code", max_parallel_sub_calls=cap)


def test_a_code_runtime_must_look_like_one() -> None:
    with pytest.raises(TypeError, match="code_runtime must be a CodeRuntime"):
        ToolRegistry(code_runtime=object())  # type: ignore[arg-type]


# ---------------------------------------------------------------- C-CODE-6
async def test_c_code_6_concurrency_safe_calls_overlap() -> None:
    reg, fake = code_registry()
    watch = Watch()
    gated = Gated(reg, "safe_read", safe=True, watch=watch)
    log = log_step()

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        read = bindings["safe_read"]
        everything = asyncio.gather(*(read({"id": i}) for i in "abc"))
        await watch.until(lambda: gated.pending() == 3)  # all three started, none done
        gated.release_all()
        return outcome(result=",".join(await everything))

    fake.behavior = program
    result = await run_code(reg, log=log)
    assert result.value["result"] == "safe_read:a,safe_read:b,safe_read:c"
    assert gated.peak == 3
    starts = [e["subCallId"] for e in events(log, "tool/ptc-dispatch-start")]
    assert starts == ["call-1:ptc:1", "call-1:ptc:2", "call-1:ptc:3"]


async def test_c_code_6_an_exclusive_call_bars_overlap() -> None:
    reg, fake = code_registry()
    watch = Watch()
    safe = Gated(reg, "safe_read", safe=True, watch=watch)
    unsafe = Gated(reg, "writer", safe=False, watch=watch)
    checks: list[tuple[int, int]] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        reads = [bindings["safe_read"]({"id": f"r{i}"}) for i in (1, 2)]
        calls = asyncio.gather(
            *reads, bindings["writer"]({"id": "w"}), bindings["safe_read"]({"id": "r3"})
        )
        await watch.until(lambda: safe.pending() == 2)
        checks.append((safe.pending(), unsafe.pending()))  # the writer waits for the pool
        safe.release_all()
        await watch.until(lambda: unsafe.pending() == 1)
        checks.append((safe.pending(), unsafe.pending()))  # r3 waits behind the writer
        unsafe.release()
        await watch.until(lambda: safe.pending() == 1)
        safe.release_all()
        await calls
        return outcome(result="ordered")

    fake.behavior = program
    assert not (await run_code(reg)).is_error
    assert checks == [(2, 0), (0, 1)]
    assert unsafe.order == ["start:w", "end:w"]
    assert safe.order.index("start:r3") > safe.order.index("end:r2")


async def test_c_code_6_the_cap_limits_the_overlap_window() -> None:
    reg, fake = code_registry(max_parallel_sub_calls=2)
    watch = Watch()
    gated = Gated(reg, "safe_read", safe=True, watch=watch)
    seen: list[int] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        everything = asyncio.gather(*(bindings["safe_read"]({"id": i}) for i in "abc"))
        await watch.until(lambda: gated.pending() == 2)
        seen.append(len(gated.order))  # two started, the third waits for a slot
        gated.release()
        await watch.until(lambda: gated.order.count("end:a") == 1 and gated.pending() == 2)
        gated.release_all()
        await everything
        return outcome()

    fake.behavior = program
    assert not (await run_code(reg)).is_error
    assert seen == [2]
    assert gated.peak == 2


async def test_c_code_6_a_cap_of_one_or_no_classifier_runs_one_at_a_time() -> None:
    for cap, safe in ((1, True), (10, False)):
        reg, fake = code_registry(max_parallel_sub_calls=cap)
        watch = Watch()
        gated = Gated(reg, "probe", safe=safe, watch=watch)

        async def program(
            bindings: Mapping[str, Any], signal: AbortSignal, g: Gated = gated, w: Watch = watch
        ) -> CodeRunOutcome:
            everything = asyncio.gather(*(bindings["probe"]({"id": i}) for i in "abc"))
            for done in range(3):
                await w.until(lambda done=done: g.pending() == 1 and len(g.order) == 2 * done + 1)
                g.release()
            return outcome(result=await everything)

        fake.behavior = program
        result = await run_code(reg)
        assert result.value["result"] == ["probe:a", "probe:b", "probe:c"]
        assert gated.order == ["start:a", "end:a", "start:b", "end:b", "start:c", "end:c"]
        assert gated.peak == 1


async def test_c_code_6_ordered_pre_execute_never_overlaps() -> None:
    reg, fake = code_registry()
    watch = Watch()
    gated = Gated(reg, "safe_read", safe=True, watch=watch)
    stages: list[str] = []
    first_gate = asyncio.Event()

    async def pre(execution: Any, next: Any) -> Any:
        if execution.name == "safe_read":
            stages.append(f"pre-enter:{execution.call_id}")
            watch.notify()
            if len(stages) == 1:
                await first_gate.wait()
            stages.append(f"pre-exit:{execution.call_id}")
        return await next()

    reg.on_pre_execute(pre)
    snapshot: list[list[str]] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        both = asyncio.gather(*(bindings["safe_read"]({"id": i}) for i in "ab"))
        await watch.until(lambda: len(stages) >= 1)
        for _ in range(3):
            await asyncio.sleep(0)  # give a wrongly started second call every chance to enter
        snapshot.append(list(stages))
        first_gate.set()
        await watch.until(lambda: gated.pending() == 2)
        gated.release_all()
        await both
        return outcome()

    fake.behavior = program
    assert not (await run_code(reg)).is_error
    assert snapshot == [["pre-enter:call-1:ptc:1"]]
    assert stages == [
        "pre-enter:call-1:ptc:1",
        "pre-exit:call-1:ptc:1",
        "pre-enter:call-1:ptc:2",
        "pre-exit:call-1:ptc:2",
    ]


async def test_c_code_6_an_exclusive_call_holds_its_barrier_through_post_execute() -> None:
    reg, fake = code_registry()
    watch = Watch()
    writer = Gated(reg, "writer", safe=False, watch=watch)
    reader = Gated(reg, "safe_read", safe=True, watch=watch)
    stages: list[str] = []
    post_gate = asyncio.Event()

    async def post(execution: Any, result: Any, next: Any) -> Any:
        if execution.name == "writer":
            stages.append("post-enter:writer")
            watch.notify()
            await post_gate.wait()
            stages.append("post-exit:writer")
        return await next()

    reg.on_post_execute(post)
    seen: list[int] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        w = asyncio.ensure_future(bindings["writer"]({"id": "w"}))
        r = asyncio.ensure_future(bindings["safe_read"]({"id": "r"}))
        await watch.until(lambda: writer.pending() == 1)
        writer.release()
        await watch.until(lambda: "post-enter:writer" in stages)
        seen.append(len(reader.order))  # the read has not started under the barrier
        post_gate.set()
        await w
        await watch.until(lambda: reader.pending() == 1)
        reader.release_all()
        await r
        return outcome()

    fake.behavior = program
    assert not (await run_code(reg)).is_error
    assert seen == [0]
    assert stages == ["post-enter:writer", "post-exit:writer"]


async def test_c_code_6_calls_are_reclassified_when_they_start() -> None:
    reg, fake = code_registry()
    watch = Watch()
    flip = {"safe": True}
    gated = Gated(reg, "flaky", safe=True, watch=watch)
    reg.on_pre_execute(lambda execution, next: next())
    original = reg.execution_mode
    modes: list[str] = []

    def classify(inp: Any) -> Any:
        mode = original(inp) if flip["safe"] else "exclusive"
        if inp.parent is not None:
            modes.append(mode)
        return mode

    reg.execution_mode = classify  # type: ignore[method-assign]

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        first = asyncio.ensure_future(bindings["flaky"]({"id": "a"}))
        await watch.until(lambda: gated.pending() == 1)
        flip["safe"] = False  # a registry change while the second call is queued
        second = asyncio.ensure_future(bindings["flaky"]({"id": "b"}))
        for _ in range(3):
            await asyncio.sleep(0)
        blocked = gated.pending()
        gated.release_all()
        await watch.until(lambda: gated.pending() == 1)
        gated.release_all()
        await asyncio.gather(first, second)
        return outcome(result=blocked)

    fake.behavior = program
    result = await run_code(reg)
    assert result.value["result"] == 1  # b, now exclusive, waited for a
    assert modes[0] == "parallel"
    assert "exclusive" in modes


# ---------------------------------------------------------------- C-CODE-7
async def test_c_code_7_outcomes_commit_in_submission_order() -> None:
    reg, fake = code_registry()
    watch = Watch()
    gated = Gated(reg, "safe_read", safe=True, watch=watch)
    post_order: list[str] = []

    def post(execution: Any, result: Any, next: Any) -> Any:
        if execution.name != "safe_read":
            return next()
        post_order.append(execution.call_id)
        note = UserMessage([text_block(f"ctx:{execution.call_id}")], source="order-probe")
        return Accept(additional_contexts=[note])

    reg.on_post_execute(post)
    delivered: list[str] = []

    async def program(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
        async def call(ident: str) -> None:
            await bindings["safe_read"]({"id": ident})
            delivered.append(ident)

        a, b = asyncio.ensure_future(call("a")), asyncio.ensure_future(call("b"))
        await watch.until(lambda: gated.pending() == 2)
        gated.release(1)  # b completes first
        await watch.until(lambda: gated.order[-1] == "end:b")
        for _ in range(3):
            await asyncio.sleep(0)
        early = list(delivered)  # b's value waits for a's commit
        gated.release_all()
        await asyncio.gather(a, b)
        return outcome(result=early)

    fake.behavior = program
    result = await run_code(reg)
    assert result.value["result"] == []
    assert delivered == ["a", "b"]
    assert post_order == ["call-1:ptc:1", "call-1:ptc:2"]
    assert [m.content[0]["text"] for m in result.additional_contexts] == [
        "ctx:call-1:ptc:1",
        "ctx:call-1:ptc:2",
    ]
