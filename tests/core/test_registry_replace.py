"""``register(definition, *, when=None, replace=False)`` ("idempotent registration").

Without ``replace`` the R-REG-09/10 duplicate rule stands, with the same texts. With
``replace=True`` the live registration of that name in that layer is swapped in one change
event; the new disposer lifts the new registration, and the replaced one's disposer no longer
lifts anything. With no registration of that name, ``replace=True`` just registers.
"""

from __future__ import annotations

import pytest

from toolray import AbortController, ActivationContext, ToolRegistry

from ._registry_helpers import MODEL, make_tool, names, run, text_of

GLOBAL_DUPLICATE = (
    'tool "t" is already registered (for a per-agent variant, register through that '
    "agent's registry.scope(key) instead)"
)
SCOPED_DUPLICATE = 'tool "t" is already registered in this scope'


def _events(reg: ToolRegistry) -> list[int]:
    events: list[int] = []
    reg.on_change(lambda: events.append(1))
    return events


@pytest.mark.parametrize("scoped", [False, True])
def test_r_reg_09_r_reg_10_without_replace_a_duplicate_still_raises(scoped: bool) -> None:
    reg = ToolRegistry()
    context = reg.scope("agent") if scoped else reg
    context.register(make_tool("t"))
    message = SCOPED_DUPLICATE if scoped else GLOBAL_DUPLICATE
    with pytest.raises(ValueError) as info:
        context.register(make_tool("t", value="other"), replace=False)
    assert str(info.value) == message


@pytest.mark.parametrize("scoped", [False, True])
async def test_replace_swaps_the_registration_in_one_change_event(scoped: bool) -> None:
    reg = ToolRegistry()
    context = reg.scope("agent") if scoped else reg
    scope = "agent" if scoped else None
    context.register(make_tool("a"))
    context.register(make_tool("t", value="old"))
    context.register(make_tool("z"))
    events = _events(reg)
    new = make_tool("t", value="new")
    context.register(new, replace=True)
    assert len(events) == 1
    assert reg.get("t", scope) is new
    assert names(reg, scope) == ["a", "t", "z"]  # the name keeps its position
    assert text_of(await run(reg, "t", scope=scope)) == "new"


def test_replace_without_a_registration_just_registers() -> None:
    reg = ToolRegistry()
    events = _events(reg)
    definition = make_tool("t")
    dispose = reg.register(definition, replace=True)
    assert reg.get("t") is definition
    assert len(events) == 1
    dispose()
    assert reg.get("t") is None


def test_the_new_disposer_lifts_the_new_registration() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t", value="old"))
    dispose_new = reg.register(make_tool("t", value="new"), replace=True)
    events = _events(reg)
    dispose_new()
    assert reg.get("t") is None  # the replaced registration does not come back
    assert len(events) == 1


def test_disposing_the_replaced_registration_leaves_the_new_one() -> None:
    reg = ToolRegistry()
    dispose_old = reg.register(make_tool("t", value="old"))
    new = make_tool("t", value="new")
    reg.register(new, replace=True)
    events = _events(reg)
    version = reg.stats().epoch
    dispose_old()
    assert reg.get("t") is new
    assert events == []  # nothing changed: no event
    assert reg.stats().epoch == version
    assert dispose_old.disposed


def test_replace_only_touches_its_own_layer() -> None:
    reg = ToolRegistry()
    glob = make_tool("t", value="global")
    reg.register(glob)
    scoped = make_tool("t", value="scoped")
    reg.scope("agent").register(scoped, replace=True)  # a shadow, not a swap
    assert reg.get("t") is glob
    assert reg.get("t", "agent") is scoped


def test_disposing_a_scope_lifts_the_replacement() -> None:
    reg = ToolRegistry()
    scope = reg.scope("agent")
    scope.register(make_tool("t", value="old"))
    scope.register(make_tool("t", value="new"), replace=True)
    scope.dispose()
    assert reg.get("t", "agent") is None


def test_r_evt_09_a_throwing_listener_rolls_the_replacement_back() -> None:
    reg = ToolRegistry()
    old = make_tool("t", value="old")
    reg.register(old)
    reg.register(make_tool("u"))

    def boom() -> None:
        raise RuntimeError("listener failed")

    dispose_listener = reg.on_change(boom)
    with pytest.raises(RuntimeError, match="listener failed"):
        reg.register(make_tool("t", value="new"), replace=True)
    dispose_listener()
    assert reg.get("t") is old
    assert names(reg) == ["t", "u"]


async def test_a_replaced_conditional_registration_drops_out_of_a_resolved_set() -> None:
    """A registration replaced by the same name drops out of a resolved set."""
    reg = ToolRegistry()
    reg.register(make_tool("t", value="old"), when=lambda ctx: True)
    tool_set = await reg.resolve(ActivationContext(None, MODEL, AbortController().signal))
    assert list(tool_set.view(None)) == ["t"]
    reg.register(make_tool("t", value="new"), when=lambda ctx: True, replace=True)
    assert list(tool_set.view(None)) == []


def test_replace_runs_the_registration_checks() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t"))
    with pytest.raises(TypeError, match="timeout_ms must be a positive finite number"):
        reg.register(make_tool("t", timeout_ms=-1), replace=True)
