"""Hook storage and ordering: guards (R-REG-19..22, P-GUARD-2/4/7/8/9/11), the pre-execute /
execute / post-execute / result tables, and the executor selection of ``set_executor``
(§11).

Order rule under test: global layer first, then the caller's chain from the farthest
ancestor to its own scope, each layer in registration order; ``prepend=True`` puts a hook
first within its own layer. A hook registered on a scope sees calls from that scope and its
descendant scopes only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from toolray import (
    AbortController,
    Accept,
    ExecutorUnavailableError,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolCallResult,
    ToolDefinition,
    ToolExecutionSuccess,
    ToolModelInput,
    ToolRegistry,
    text_block,
)

from ._registry_helpers import make_tool, run, text_of


def tree() -> ToolRegistry:
    """Global tool ``t``; scopes root → mid → leaf, plus a sibling ``other`` of mid."""
    reg = ToolRegistry()
    reg.register(make_tool("t", value="ran:t"))
    reg.scope("mid", parent="root")
    reg.scope("leaf", parent="mid")
    reg.scope("other", parent="root")
    return reg


def context_of(reg: ToolRegistry, layer: str | None) -> Any:
    return reg if layer is None else reg.scope(layer)


def pre(trace: list[str], label: str) -> Callable[..., Any]:
    async def hook(execution: Any, next: Any) -> Any:
        trace.append(label)
        return await next()

    return hook


def around(trace: list[str], label: str) -> Callable[..., Any]:
    async def hook(execution: Any, next: Any) -> Any:
        trace.append(label)
        return await next()

    return hook


def post(trace: list[str], label: str) -> Callable[..., Any]:
    async def hook(execution: Any, result: Any, next: Any) -> Any:
        trace.append(label)
        return await next()

    return hook


def guard(trace: list[str], label: str) -> Callable[..., Any]:
    def check(execution: Any) -> None:
        trace.append(label)

    return check


ADDERS: dict[str, Callable[[Any, Any, bool], Any]] = {
    "pre": lambda ctx, fn, prepend: ctx.on_pre_execute(fn, prepend=prepend),
    "execute": lambda ctx, fn, prepend: ctx.on_execute(fn, prepend=prepend),
    "post": lambda ctx, fn, prepend: ctx.on_post_execute(fn, prepend=prepend),
    "guard": lambda ctx, fn, prepend: ctx.guard(fn),
}
MAKERS = {"pre": pre, "execute": around, "post": post, "guard": guard}
# (layer, label) in a deliberately scrambled registration order
SCRAMBLED = [
    ("leaf", "l1"),
    ("mid", "m1"),
    (None, "g1"),
    ("root", "r1"),
    ("leaf", "l2"),
    (None, "g2"),
    ("mid", "m2"),
]


# ---------------------------------------------------------------- ordering
@pytest.mark.parametrize("kind", ["pre", "execute", "post", "guard"])
async def test_hooks_run_global_first_then_their_scope(kind: str) -> None:
    """Guards walk the chain farthest first (P-GUARD-2); hooks run the global ones, then the
    calling scope's own: a scoped listener sees only its own scope's calls."""
    reg, trace = tree(), []
    for layer, label in SCRAMBLED:
        ADDERS[kind](context_of(reg, layer), MAKERS[kind](trace, label), False)
    result = await run(reg, "t", scope="leaf")
    assert text_of(result) == "ran:t"
    if kind == "guard":
        assert trace == ["g1", "g2", "r1", "m1", "m2", "l1", "l2"]
    else:
        assert trace == ["g1", "g2", "l1", "l2"]


@pytest.mark.parametrize("kind", ["pre", "execute", "post"])
async def test_prepend_puts_a_hook_first_within_its_layer(kind: str) -> None:
    reg, trace = tree(), []
    for layer, label in SCRAMBLED:
        ADDERS[kind](context_of(reg, layer), MAKERS[kind](trace, label), False)
    ADDERS[kind](reg.scope("leaf"), MAKERS[kind](trace, "l0"), True)
    ADDERS[kind](reg, MAKERS[kind](trace, "g0"), True)
    await run(reg, "t", scope="leaf")
    assert trace == ["g0", "g1", "g2", "l0", "l1", "l2"]


# ---------------------------------------------------------------- scope filtering
@pytest.mark.parametrize("kind", ["pre", "execute", "post", "guard", "result"])
async def test_scoped_hooks_see_their_own_scope_only_and_guards_their_descendants(
    kind: str,
) -> None:
    """P-PRE-18 / P-RES-5 for hooks; P-GUARD-2 (the chain) for guards."""
    reg, trace = tree(), []
    if kind == "result":
        reg.scope("mid").on_result(lambda execution, result: trace.append(execution.scope))
    else:

        def recorder(*args: Any) -> Any:
            trace.append(args[0].scope)
            return args[-1]() if kind != "guard" else None

        ADDERS[kind](reg.scope("mid"), recorder, False)
    for caller in (None, "root", "mid", "leaf", "other", "unrelated"):
        assert text_of(await run(reg, "t", scope=caller)) == "ran:t"
    assert trace == (["mid", "leaf"] if kind == "guard" else ["mid"])


# ---------------------------------------------------------------- duplicates
@pytest.mark.parametrize("kind", ["pre", "execute", "post", "guard"])
async def test_duplicate_hook_registrations_are_independent(kind: str) -> None:
    reg, trace = tree(), []
    fn = MAKERS[kind](trace, "dup")
    scoped = reg.scope("leaf")
    first = ADDERS[kind](scoped, fn, False)
    ADDERS[kind](scoped, fn, False)
    await run(reg, "t", scope="leaf")
    assert trace == ["dup", "dup"]
    first()
    first()
    trace.clear()
    await run(reg, "t", scope="leaf")
    assert trace == ["dup"]
    scoped.dispose()
    trace.clear()
    await run(reg, "t", scope="leaf")
    assert trace == []


async def test_r_reg_19_p_guard_9_identical_guards_lift_independently() -> None:
    reg = tree()
    scoped = reg.scope("leaf")

    def deny(execution: Any) -> str:
        return "terminal policy"

    lift_one = scoped.guard(deny)
    lift_two = scoped.guard(deny)
    assert text_of(await run(reg, "t", scope="leaf")) == "Error: terminal policy"
    lift_one()
    lift_one()
    assert text_of(await run(reg, "t", scope="leaf")) == "Error: terminal policy"
    lift_two()
    assert text_of(await run(reg, "t", scope="leaf")) == "ran:t"


# ---------------------------------------------------------------- guard semantics
async def test_r_reg_20_the_first_denial_wins_after_abstentions() -> None:
    reg, trace = tree(), []
    reg.guard(guard(trace, "abstain"))
    reg.guard(lambda execution: trace.append("deny") or "global denial")  # type: ignore[func-returns-value]
    reg.scope("leaf").guard(guard(trace, "never reached"))
    result = await run(reg, "t", scope="leaf")
    assert text_of(result) == "Error: global denial"
    assert result.error.info is None  # type: ignore[union-attr]
    assert trace == ["abstain", "deny"]


async def test_r_reg_20_p_guard_4_scoped_guards_need_a_calling_scope() -> None:
    reg = tree()
    reg.scope("leaf").guard(lambda execution: "leaf only")
    assert text_of(await run(reg, "t")) == "ran:t"
    assert text_of(await run(reg, "t", scope="other")) == "ran:t"
    assert text_of(await run(reg, "t", scope="leaf")) == "Error: leaf only"


@pytest.mark.parametrize(("verdict", "text"), [("", "Error: "), (None, "ran:t")])
async def test_r_reg_21_p_guard_11_only_none_abstains(verdict: str | None, text: str) -> None:
    reg = tree()
    reg.guard(lambda execution: verdict)
    assert text_of(await run(reg, "t")) == text


async def test_r_reg_22_p_guard_7_a_guard_added_during_evaluation_runs_in_the_same_pass() -> None:
    reg, trace = tree(), []
    added: list[bool] = []

    def late(execution: Any) -> str:
        trace.append("late")
        return "late denial"

    def first(execution: Any) -> None:
        trace.append("first")
        if not added:
            added.append(True)
            reg.guard(late)

    reg.guard(first)
    assert text_of(await run(reg, "t")) == "Error: late denial"
    assert trace == ["first", "late"]


async def test_r_reg_22_p_guard_8_a_replaced_last_scoped_guard_waits_for_the_next_call() -> None:
    reg = tree()
    scoped = reg.scope("leaf")
    lifts: list[Any] = []

    def replacement(execution: Any) -> str:
        return "replacement denial"

    def self_replacing(execution: Any) -> None:
        lifts[0]()
        scoped.guard(replacement)

    lifts.append(scoped.guard(self_replacing))
    assert text_of(await run(reg, "t", scope="leaf")) == "ran:t"
    assert text_of(await run(reg, "t", scope="leaf")) == "Error: replacement denial"


def test_check_guards_reads_the_same_chain() -> None:
    reg = tree()
    reg.scope("mid").guard(lambda execution: f"mid saw {execution.scope}")

    class Probe:
        scope = "leaf"

    assert reg.check_guards(Probe()) == "mid saw leaf"  # type: ignore[arg-type]
    Probe.scope = "other"
    assert reg.check_guards(Probe()) is None  # type: ignore[arg-type]


async def test_a_post_hook_on_a_scope_does_not_touch_other_scopes_results() -> None:
    reg = tree()

    async def rewrite(execution: Any, result: Any, next: Any) -> Any:
        return Accept(content=[text_block("rewritten")])

    reg.scope("other").on_post_execute(rewrite)
    assert text_of(await run(reg, "t", scope="other")) == "rewritten"
    assert text_of(await run(reg, "t", scope="leaf")) == "ran:t"


# ---------------------------------------------------------------- executors
class FakeExecutor:
    """A ``ToolExecutor`` that answers every call with its own label."""

    sections: Sequence[Any] = ()

    def __init__(self, label: str) -> None:
        self.label = label
        self.batches: list[ToolBatchInput] = []

    def describe(self, definitions: Sequence[ToolDefinition]) -> ToolModelInput:
        return ToolModelInput(schemas=[], known_names=[d.name for d in definitions])

    async def execute(self, batch: ToolBatchInput) -> ToolBatchResult:
        self.batches.append(batch)
        labelled = ToolExecutionSuccess(value=self.label, content=[text_block(self.label)])
        return ToolBatchResult(
            results=tuple(ToolCallResult(c.id, labelled) for c in batch.calls),
            additional_contexts=(),
            concluded=False,
        )


async def served_by(reg: ToolRegistry, scope: str | None) -> str:
    batch = ToolBatchInput([ToolCall("c1", "t", "{}")], AbortController().signal, scope=scope)
    result = await reg.execute_batch(batch)
    return text_of(result.results[0].result)


async def test_a_new_registry_has_an_in_process_default_executor() -> None:
    reg = tree()
    assert await served_by(reg, None) == "ran:t"
    assert await served_by(reg, "leaf") == "ran:t"


async def test_a_global_set_executor_replaces_the_default_until_disposed() -> None:
    reg = tree()
    fake = FakeExecutor("global-fake")
    dispose = reg.set_executor(fake)
    assert await served_by(reg, None) == "global-fake"
    assert await served_by(reg, "leaf") == "global-fake"
    assert len(fake.batches) == 2
    dispose()
    for scope in (None, "leaf"):
        with pytest.raises(ExecutorUnavailableError):
            await served_by(reg, scope)
    reg.set_executor(FakeExecutor("second"))
    assert await served_by(reg, "leaf") == "second"


async def test_a_scoped_executor_serves_its_descendants_and_the_nearest_wins() -> None:
    reg = tree()
    lift_mid = reg.scope("mid").set_executor(FakeExecutor("mid"))
    reg.scope("leaf").set_executor(FakeExecutor("leaf"))
    assert await served_by(reg, "mid") == "mid"
    assert await served_by(reg, "leaf") == "leaf"
    assert await served_by(reg, "root") == "ran:t"
    assert await served_by(reg, "other") == "ran:t"
    assert await served_by(reg, None) == "ran:t"
    lift_mid()
    assert await served_by(reg, "mid") == "ran:t"
    assert await served_by(reg, "leaf") == "leaf"


async def test_a_scoped_executor_survives_the_loss_of_the_global_one() -> None:
    reg = tree()
    reg.scope("mid").set_executor(FakeExecutor("mid"))
    reg.set_executor(FakeExecutor("global"))()
    assert await served_by(reg, "leaf") == "mid"
    with pytest.raises(ExecutorUnavailableError):
        await served_by(reg, "other")
