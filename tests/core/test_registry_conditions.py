"""Seed-only behaviour: conditional registrations (``when``), ``resolve`` and the step-owned
``ResolvedToolSet``, ``executable``/``definitions`` with and without a set (§9,
§11 "resolve()"; seed 000 "条件准入" and the ``ctx.tools`` reference).

These behaviours have no R-* entry (the catalogued release had no conditions), so the test
names say ``seed``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray import (
    RESERVED_TOOL_NAME,
    AbortController,
    AbortError,
    ActivationContext,
    ToolBatchInput,
    ToolCall,
    ToolRegistry,
)
from toolray.testing import Gate

from ._registry_helpers import MODEL, activation, code_of, make_tool, names, resolve, run, text_of


def always(context: ActivationContext) -> bool:
    return True


def never(context: ActivationContext) -> bool:
    return False


def async_verdict(verdict: bool) -> Any:
    async def condition(context: ActivationContext) -> bool:
        return verdict

    return condition


# ---------------------------------------------------------------- registration
async def test_seed_when_makes_a_registration_conditional() -> None:
    reg = ToolRegistry()
    conditional = make_tool("cond")
    reg.register(conditional, when=always)
    reg.register(make_tool("plain"))
    assert reg.executable("cond") is None
    assert reg.executable("plain") is not None
    assert reg.get("cond") is conditional
    assert names(reg) == ["cond", "plain"]
    assert reg.definitions() == [conditional, reg.get("plain")]
    result = await run(reg, "cond")
    assert code_of(result) == "UNKNOWN_TOOL"


def test_seed_conditional_scoped_registration_is_not_executable_without_a_set() -> None:
    reg = ToolRegistry()
    reg.scope("agent").register(make_tool("cond"), when=always)
    assert reg.executable("cond", "agent") is None
    assert reg.get("cond", "agent") is not None


def test_seed_when_must_be_callable() -> None:
    reg = ToolRegistry()
    with pytest.raises(TypeError):
        reg.register(make_tool("t"), when=True)  # type: ignore[arg-type]
    assert reg.get("t") is None


# ---------------------------------------------------------------- resolve
async def test_seed_resolve_admits_true_conditions_sync_and_async() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("plain"))
    reg.register(make_tool("yes_sync"), when=always)
    reg.register(make_tool("no_sync"), when=never)
    reg.register(make_tool("yes_async"), when=async_verdict(True))
    reg.register(make_tool("no_async"), when=async_verdict(False))
    tool_set = await resolve(reg, None)
    assert list(tool_set.view(None)) == ["plain", "yes_sync", "yes_async"]
    assert tool_set.view(None)["yes_sync"] is reg.get("yes_sync")
    assert reg.executable("yes_async", None, tool_set) is reg.get("yes_async")
    assert reg.executable("no_async", None, tool_set) is None
    assert names(reg, None, tool_set) == ["plain", "yes_sync", "yes_async"]
    assert text_of(await run(reg, "yes_sync", tool_set=tool_set)) == "yes_sync"
    assert code_of(await run(reg, "no_sync", tool_set=tool_set)) == "UNKNOWN_TOOL"


async def test_seed_conditions_see_the_steps_context_once_per_step() -> None:
    reg = ToolRegistry()
    seen: list[ActivationContext] = []

    def record(context: ActivationContext) -> bool:
        seen.append(context)
        return True

    reg.scope("agent").register(make_tool("t"), when=record)
    ctrl = AbortController()
    await reg.resolve(ActivationContext("agent", MODEL, ctrl.signal))
    assert len(seen) == 1
    assert seen[0].scope == "agent"
    assert seen[0].model == MODEL
    assert seen[0].signal is ctrl.signal
    await resolve(reg, "agent")
    assert len(seen) == 2


async def test_seed_conditions_on_the_chain_are_admitted_into_the_scope() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("g"), when=always)
    reg.scope("preset").register(make_tool("p"), when=always)
    reg.scope("preset").register(make_tool("q"), when=never)
    reg.scope("agent", parent="preset")
    tool_set = await resolve(reg, "agent")
    assert list(tool_set.view("agent")) == ["g", "p"]


async def test_seed_resolve_evaluates_conditions_concurrently() -> None:
    reg = ToolRegistry()
    started = {"a": asyncio.Event(), "b": asyncio.Event()}
    overlap: list[bool] = []

    def condition(mine: str, other: str) -> Any:
        async def when(context: ActivationContext) -> bool:
            started[mine].set()
            await started[other].wait()  # deadlocks if conditions run one after another
            overlap.append(started[mine].is_set() and started[other].is_set())
            return True

        return when

    reg.register(make_tool("a"), when=condition("a", "b"))
    reg.register(make_tool("b"), when=condition("b", "a"))
    tool_set = await asyncio.wait_for(resolve(reg, None), timeout=10)
    assert overlap == [True, True]
    assert list(tool_set.view(None)) == ["a", "b"]


# ---------------------------------------------------------------- failures and cancellation
async def test_seed_a_raising_condition_fails_resolve_first_in_registration_order() -> None:
    reg = ToolRegistry()
    first, second = RuntimeError("first registered"), RuntimeError("second registered")
    gate = Gate()

    async def slow_raise(context: ActivationContext) -> bool:
        await gate.wait()
        raise first

    async def fast_raise(context: ActivationContext) -> bool:
        gate.open()  # the first-registered condition raises only after this one
        raise second

    reg.register(make_tool("ok"), when=always)
    reg.register(make_tool("a"), when=slow_raise)
    reg.register(make_tool("b"), when=fast_raise)
    with pytest.raises(RuntimeError) as info:
        await resolve(reg, None)
    assert info.value is first


async def test_seed_a_sync_raising_condition_fails_resolve() -> None:
    reg = ToolRegistry()
    boom = ValueError("bad condition")

    def raising(context: ActivationContext) -> bool:
        raise boom

    reg.register(make_tool("ok"), when=always)
    reg.register(make_tool("bad"), when=raising)
    with pytest.raises(ValueError) as info:
        await resolve(reg, None)
    assert info.value is boom


@pytest.mark.parametrize(
    ("reason", "expected"),
    [(None, AbortError), ("stop", AbortError), (KeyError("mine"), KeyError)],
    ids=["no-reason", "string-reason", "exception-reason"],
)
async def test_seed_resolve_with_a_pre_aborted_signal_raises(
    reason: Any, expected: type[BaseException]
) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t"), when=always)
    ctrl = AbortController()
    ctrl.abort(reason)
    with pytest.raises(expected) as info:
        await resolve(reg, None, ctrl.signal)
    if isinstance(reason, BaseException):
        assert info.value is reason


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("stop", AbortError), (KeyError("mine"), KeyError)],
    ids=["string-reason", "exception-reason"],
)
async def test_seed_cancellation_during_resolve_publishes_nothing(
    reason: Any, expected: type[BaseException]
) -> None:
    reg = ToolRegistry()
    started, never_opened = asyncio.Event(), Gate()
    reg.register(make_tool("quick"), when=always)

    async def pending(context: ActivationContext) -> bool:
        started.set()
        await never_opened.wait()
        return True

    reg.register(make_tool("slow"), when=pending)
    ctrl = AbortController()

    async def abort_once_started() -> None:
        await started.wait()
        ctrl.abort(reason)

    outcome = await asyncio.wait_for(
        asyncio.gather(
            resolve(reg, None, ctrl.signal), abort_once_started(), return_exceptions=True
        ),
        timeout=10,
    )
    assert isinstance(outcome[0], expected)
    if isinstance(reason, BaseException):
        assert outcome[0] is reason
    assert reg.executable("quick") is None


# ---------------------------------------------------------------- the set
async def test_seed_view_of_another_scope_is_empty() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("g"))
    reg.scope("agent").register(make_tool("own"))
    tool_set = await resolve(reg, "agent")
    assert list(tool_set.view("agent")) == ["g", "own"]
    assert dict(tool_set.view(None)) == {}
    assert dict(tool_set.view("other")) == {}
    assert reg.executable("g", "other", tool_set) is None
    global_set = await resolve(reg, None)
    assert list(global_set.view(None)) == ["g"]
    assert dict(global_set.view("agent")) == {}


async def test_seed_replacement_restriction_or_disposal_drops_an_admitted_registration() -> None:
    reg = ToolRegistry()
    d_a = reg.register(make_tool("a", value="old"), when=always)
    reg.register(make_tool("b"), when=always)
    d_c = reg.register(make_tool("c"), when=always)
    tool_set = await resolve(reg, "agent")
    assert list(tool_set.view("agent")) == ["a", "b", "c"]
    d_a()
    reg.register(make_tool("a", value="new"))
    reg.scope("agent").restrict(deny=["b"])
    d_c()
    assert dict(tool_set.view("agent")) == {}
    assert reg.executable("a", "agent", tool_set) is None
    assert code_of(await run(reg, "a", scope="agent", tool_set=tool_set)) == "UNKNOWN_TOOL"


async def test_seed_a_replacement_stops_a_call_that_has_not_started() -> None:
    reg = ToolRegistry()
    ran: list[str] = []

    async def body(args: Any, ctx: Any) -> str:
        ran.append("old")
        return "old"

    dispose = reg.register(make_tool("t", execute=body), when=always)
    tool_set = await resolve(reg, None)
    entered, release = asyncio.Event(), Gate()

    async def hold(execution: Any, next: Any) -> Any:
        entered.set()
        await release.wait()
        return await next()

    reg.on_pre_execute(hold)
    call = asyncio.ensure_future(run(reg, "t", tool_set=tool_set))
    await entered.wait()
    dispose()
    reg.register(make_tool("t", value="replacement"))
    release.open()
    result = await call
    assert code_of(result) == "UNKNOWN_TOOL"
    assert ran == []


async def test_seed_dispose_closes_admission() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("plain"))
    reg.register(make_tool("cond"), when=always)
    tool_set = await resolve(reg, None)
    tool_set.dispose()
    tool_set.dispose()
    assert dict(tool_set.view(None)) == {}
    assert reg.executable("plain", None, tool_set) is None
    assert code_of(await run(reg, "cond", tool_set=tool_set)) == "UNKNOWN_TOOL"


async def test_seed_the_set_is_a_context_manager() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("cond"), when=always)
    with await resolve(reg, None) as tool_set:
        assert list(tool_set.view(None)) == ["cond"]
    assert dict(tool_set.view(None)) == {}


async def test_seed_nothing_registered_after_resolve_is_admitted() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("early"))
    tool_set = await resolve(reg, "agent")
    reg.register(make_tool("late_plain"))
    reg.register(make_tool("late_cond"), when=always)
    reg.scope("agent").register(make_tool("late_scoped"))
    assert list(tool_set.view("agent")) == ["early"]
    assert reg.executable("late_plain", "agent", tool_set) is None
    assert reg.executable("late_plain", "agent") is not None


@pytest.mark.parametrize("mode", ["native", "code", "both"])
async def test_seed_definitions_list_admitted_capabilities_never_run_code(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    plain, cond = make_tool("plain"), make_tool("cond")
    reg.register(plain)
    reg.register(cond, when=always)
    reg.register(make_tool("off"), when=never)
    tool_set = await resolve(reg, "agent")
    assert reg.definitions("agent", tool_set) == [plain, cond]
    assert reg.definitions("agent") == [plain, cond, reg.get("off")]
    assert all(d.name != RESERVED_TOOL_NAME for d in reg.definitions("agent", tool_set))


async def test_seed_get_with_a_set_reads_the_set() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("on"), when=always)
    reg.register(make_tool("off"), when=never)
    tool_set = await resolve(reg, None)
    assert reg.get("on", None, tool_set) is reg.get("on")
    assert reg.get("off", None, tool_set) is None
    assert reg.get("off") is not None


async def test_seed_a_batch_uses_its_set_for_every_call() -> None:
    reg = ToolRegistry()
    reg.scope("agent").register(make_tool("cond"), when=always)
    tool_set = await resolve(reg, "agent")
    calls = [ToolCall("c1", "cond", "{}")]
    with_set = await reg.execute_batch(
        ToolBatchInput(calls, activation("agent").signal, scope="agent", tool_set=tool_set)
    )
    without = await reg.execute_batch(
        ToolBatchInput(calls, activation("agent").signal, scope="agent")
    )
    assert text_of(with_set.results[0].result) == "cond"
    assert code_of(without.results[0].result) == "UNKNOWN_TOOL"
