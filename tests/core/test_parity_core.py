"""Core pieces of Ray parity: resolve aborts, placements, tool-set transport.

- ``resolve()`` whose signal aborts *during* resolution — even from inside a sync ``when``
  — raises instead of publishing a set;
- ``Placement(size=…, spare=…, max_concurrency=…)`` validates its pool sizing;
- a disposed scope takes no contribution, ``on_change`` included (like every write);
- ``toolray.lowlevel`` can record which registrations a set admitted and rebuild the set
  (what the Ray layer does to carry a set from the executor that resolved it to another).
"""

from __future__ import annotations

from typing import Any

import pytest

from toolray import AbortController, AbortError, ActivationContext, Placement, ToolRegistry
from toolray.lowlevel import admitted_entries, chain_entries, tool_set_of

from ._registry_helpers import activation, make_tool, resolve


@pytest.mark.parametrize(
    ("reason", "expected"),
    [("stop", AbortError), (KeyError("mine"), KeyError)],
    ids=["string-reason", "exception-reason"],
)
async def test_seed_an_abort_from_inside_a_sync_condition_publishes_nothing(
    reason: Any, expected: type[BaseException]
) -> None:
    """R-COND-09: cancellation during resolution raises, even with only sync conditions."""
    reg = ToolRegistry()
    ctrl = AbortController()

    def aborts(context: ActivationContext) -> bool:
        ctrl.abort(reason)
        return True

    reg.register(make_tool("cond"), when=aborts)
    with pytest.raises(expected):
        await resolve(reg, None, ctrl.signal)


async def test_seed_an_abort_while_async_conditions_finish_publishes_nothing() -> None:
    """A condition that aborts the step and then returns still publishes no set."""
    reg = ToolRegistry()
    ctrl = AbortController()

    async def aborts(context: ActivationContext) -> bool:
        ctrl.abort("stop")
        return True

    reg.register(make_tool("cond"), when=aborts)
    with pytest.raises(AbortError, match="tool resolution was aborted"):
        await resolve(reg, None, ctrl.signal)


def test_placement_sizes_its_pool_and_rejects_nonsense() -> None:
    placement = Placement(resources={"special": 1}, size=2, spare=0, max_concurrency=4)
    assert (placement.size, placement.spare, placement.max_concurrency) == (2, 0, 4)
    assert Placement(pool="gpu").size is None
    with pytest.raises(ValueError, match=r"Placement\.size must be a positive integer"):
        Placement(size=0)
    with pytest.raises(ValueError, match=r"Placement\.spare must be a non-negative integer"):
        Placement(spare=-1)
    with pytest.raises(ValueError, match=r"Placement\.max_concurrency must be a positive integer"):
        Placement(max_concurrency=True)  # type: ignore[arg-type]


def test_a_disposed_scope_takes_no_change_listener() -> None:
    reg = ToolRegistry()
    scope = reg.scope("agent")
    scope.dispose()
    with pytest.raises(RuntimeError, match='scope "agent" is disposed'):
        scope.on_change(lambda: None)
    with pytest.raises(RuntimeError, match='scope "agent" is disposed'):
        scope.register(make_tool("t"))


async def test_a_set_is_rebuilt_from_the_registrations_it_admitted() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("plain"))
    reg.register(make_tool("on"), when=lambda c: True)
    reg.register(make_tool("off"), when=lambda c: False)
    reg.scope("agent").register(make_tool("own"))
    step = await reg.resolve(activation("agent"))
    admitted = admitted_entries(reg, step)
    assert [e.definition.name for e in admitted] == ["plain", "on", "own"]
    assert [e.definition.name for e in chain_entries(reg, "agent")] == [
        "plain",
        "on",
        "off",
        "own",
    ]
    rebuilt = tool_set_of(reg, "agent", admitted)
    assert list(rebuilt.view("agent")) == list(step.view("agent"))
    assert dict(rebuilt.view("other")) == {}
    step.dispose()
    assert admitted_entries(reg, step) == []
