"""P-GUARD: monotonic guards.

Every entry has a Python meaning. A guard is ``fn(execution) -> str | None``: ``None``
abstains (Python has no ``undefined``), any ``str`` denies.
"""

from __future__ import annotations

from typing import Any

import pytest

from toolray import AbortController, Allow, Deny, FrozenDict, ToolRegistry, text_block

from ._pipeline_helpers import (
    ABD_INFO,
    ABORTED_BEFORE,
    Probe,
    assert_failure,
    call,
    error_wire,
    stage_counts,
)


async def test_p_guard_1_guards_run_after_pre_execute_and_cannot_be_bypassed(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    trace: list[str] = []

    async def force_allow(execution: Any, next_: Any) -> Any:
        trace.append("pre")
        return Allow()  # never calls next(): still cannot bypass the guard

    def guard(execution: Any) -> str:
        trace.append("guard")
        return "terminal policy"

    reg.on_pre_execute(force_allow, prepend=True)
    reg.guard(guard)
    result = await reg.execute(call())
    assert trace == ["pre", "guard"]
    assert result.to_wire() == error_wire("terminal policy")
    assert probe.counts["body"] == 0


async def test_p_guard_1_guards_run_only_when_the_decision_is_allow(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()

    async def deny(execution: Any, next_: Any) -> Any:
        return Deny("no")

    reg.on_pre_execute(deny)
    await reg.execute(call())
    assert probe.counts["guard"] == 0


async def test_p_guard_2_evaluation_order_global_then_chain_farthest_first() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    trace: list[str] = []

    def guard(label: str, verdict: str | None = None) -> Any:
        def check(execution: Any) -> str | None:
            trace.append(label)
            return verdict

        return check

    root = reg.scope("root")
    child = reg.scope("child", parent="root")
    child.guard(guard("child-1"))
    root.guard(guard("root-1"))
    reg.guard(guard("global-1"))
    child.guard(guard("child-2"))
    reg.guard(guard("global-2"))
    result = await reg.execute(call(scope="child"))
    assert not result.is_error
    assert trace == ["global-1", "global-2", "root-1", "child-1", "child-2"]

    trace.clear()
    root.guard(guard("root-2", "root denial"))
    result = await reg.execute(call(scope="child"))
    assert result.to_wire() == error_wire("root denial")
    assert trace == ["global-1", "global-2", "root-1", "root-2"]


async def test_p_guard_2_abstaining_guard_cannot_allow_a_later_denial() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    reg.guard(lambda execution: None)
    reg.guard(lambda execution: "later denial")
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("later denial")


async def test_p_guard_3_guard_denial_shape_and_post_execute(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    reg.guard(lambda execution: "terminal policy")
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("terminal policy")
    assert result.error.info is None  # type: ignore[union-attr]
    assert probe.stages() == stage_counts(pre=1, guard=1, post=1, finalize=1, result=1)
    assert probe.post_results[0].is_error


async def test_p_guard_4_scoped_guard_applies_only_to_its_agent() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    reg.scope("a").guard(lambda execution: "terminal policy")
    reg.scope("other")
    denied = await reg.execute(call(arguments={"text": "t"}, scope="a"))
    other = await reg.execute(call(arguments={"text": "ran:t"}, scope="other"))
    agentless = await reg.execute(call(arguments={"text": "ran:t"}))
    assert denied.to_wire() == error_wire("terminal policy")
    assert other.content == [text_block("ran:t")]
    assert agentless.content == [text_block("ran:t")]


async def test_p_guard_5_guards_receive_the_frozen_arguments() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    seen: list[Any] = []

    def guard(execution: Any) -> None:
        seen.append(execution.arguments)
        with pytest.raises(TypeError):
            execution.arguments["text"] = "changed"

    reg.guard(guard)
    caller_args = {"text": "t"}
    await reg.execute(call(arguments=caller_args))
    assert type(seen[0]) is FrozenDict
    assert seen[0] == {"text": "t"}
    assert seen[0] is not caller_args


async def test_p_guard_6_throwing_guard_is_a_final_error_without_post_execute(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()

    def guard(execution: Any) -> None:
        raise RuntimeError("guard exploded")

    reg.guard(guard)
    result = await reg.execute(call())
    assert result.to_wire() == error_wire("guard exploded")
    assert probe.stages() == stage_counts(pre=1, guard=1, finalize=1, result=1)


async def test_p_guard_7_guard_registered_during_global_evaluation_runs_in_the_same_pass() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    trace: list[str] = []

    def late(execution: Any) -> str:
        trace.append("late")
        return "late denial"

    def first(execution: Any) -> None:
        trace.append("first")
        if len(trace) == 1:
            reg.guard(late)

    reg.guard(first)
    result = await reg.execute(call())
    assert trace == ["first", "late"]
    assert result.content == [text_block("Error: late denial")]


async def test_p_guard_8_scoped_replacement_of_the_last_guard_applies_from_the_next_call() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    scoped = reg.scope("a")
    trace: list[str] = []
    disposers: dict[str, Any] = {}

    def replacement(execution: Any) -> str:
        trace.append("replacement")
        return "replaced"

    def first(execution: Any) -> None:
        trace.append("first")
        disposers["first"]()
        scoped.guard(replacement)

    disposers["first"] = scoped.guard(first)
    current = await reg.execute(call(arguments={"text": "ran:t"}, scope="a"))
    assert current.content == [text_block("ran:t")]
    assert trace == ["first"]
    following = await reg.execute(call(arguments={"text": "ran:t"}, scope="a"))
    assert following.to_wire() == error_wire("replaced")
    assert trace == ["first", "replacement"]


async def test_p_guard_9_duplicate_registrations_are_independent() -> None:
    reg = ToolRegistry()
    Probe(reg).register()
    scoped = reg.scope("a")

    def deny(execution: Any) -> str:
        return "duplicate denial"

    first = scoped.guard(deny)
    scoped.guard(deny)
    first()
    still = await reg.execute(call(scope="a"))
    assert still.to_wire() == error_wire("duplicate denial")
    scoped.dispose()
    lifted = await reg.execute(call(arguments={"text": "ok"}, scope="a"))
    assert lifted.content == [text_block("ok")]


async def test_p_guard_10_guard_denial_beats_cancellation_during_the_gates(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()

    async def pre(execution: Any, next_: Any) -> Any:
        ctrl.abort("user")
        return await next_()

    reg.on_pre_execute(pre)
    reg.guard(lambda execution: "guard denial")
    result = await reg.execute(call(signal=ctrl.signal))
    assert result.to_wire() == error_wire("guard denial")
    assert probe.counts["post"] == 1


async def test_p_guard_10_without_a_denial_the_gate_cancellation_applies(
    reg: ToolRegistry, probe: Probe
) -> None:
    probe.register()
    ctrl = AbortController()
    reg.guard(lambda execution: ctrl.abort("user"))  # aborts, then abstains
    result = await reg.execute(call(signal=ctrl.signal))
    assert_failure(result, ABORTED_BEFORE, ABD_INFO)
    assert probe.counts["body"] == 0


async def test_p_guard_11_empty_string_denies(reg: ToolRegistry, probe: Probe) -> None:
    probe.register()
    reg.guard(lambda execution: "")
    result = await reg.execute(call())
    assert result.content == [text_block("Error: ")]
    assert result.to_wire() == error_wire("")
    assert probe.counts["body"] == 0
