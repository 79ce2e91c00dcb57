"""R-VIS: visibility, shadowing and ``restrict``.

Python decisions: misuse messages use the Python spelling ``restrict()``, so the
tests match the upstream text from ``restrict()`` on. R-VIS-31: ``None`` means "that side is
absent" and a non-list (a ``str``) is rejected, a deliberate divergence from upstream's loose
typing. R-VIS-32: Python has no later parent binding; a key's parent is given when the scope
is created, which may happen after the key was already read.
"""

from __future__ import annotations

import re

import pytest

from toolray import RESERVED_TOOL_NAME, ToolRegistry

from ._registry_helpers import code_of, make_tool, names, run, text_of

UNSCOPED = (
    "restrict() requires a scoped context",
    "a context-global restriction would mask every agent — deny the tool for the intended "
    "agent instead",
)
EMPTY = (
    "restrict() is a no-op: pass `allow` and/or `deny` (an empty filter is almost always a "
    "materialized-empty-config bug)"
)
RESERVED = (
    'restrict() cannot name reserved Code Mode presentation transport "run_code"; '
    "restrict end-capability tools instead"
)


def registry_with(*global_names: str, mode: str = "native") -> ToolRegistry:
    reg = ToolRegistry(mode=mode)
    for name in global_names:
        reg.register(make_tool(name, value=f"global:{name}"))
    return reg


# ---------------------------------------------------------------- R-VIS-01..05
def test_r_vis_01_a_global_tool_is_visible_everywhere() -> None:
    reg = registry_with("g")
    reg.scope("child", parent="parent")
    for scope in (None, "parent", "child", "never-created"):
        assert names(reg, scope) == ["g"], scope


def test_r_vis_02_a_scoped_tool_is_visible_to_its_scope_and_descendants_only() -> None:
    reg = ToolRegistry()
    reg.scope("parent").register(make_tool("p"))
    reg.scope("child", parent="parent")
    reg.scope("grandchild", parent="child")
    reg.scope("sibling", parent="root")
    assert names(reg, "parent") == ["p"]
    assert names(reg, "child") == ["p"]
    assert names(reg, "grandchild") == ["p"]
    assert names(reg) == []
    assert names(reg, "sibling") == []
    assert names(reg, "root") == []


@pytest.mark.parametrize("caller", [None, "other"], ids=["R-VIS-03-global", "R-VIS-03-sibling"])
async def test_r_vis_03_out_of_view_behaves_like_unknown(caller: str | None) -> None:
    reg = ToolRegistry()
    reg.scope("owner").register(make_tool("secret"))
    result = await run(reg, "secret", scope=caller)
    missing = await run(reg, "never-registered", scope=caller)
    assert result.is_error
    assert text_of(result) == 'Error: unknown tool "secret"'
    assert result.error.info is not None  # type: ignore[union-attr]
    assert result.error.info.name == "ToolNotFoundError"  # type: ignore[union-attr]
    assert code_of(result) == code_of(missing) == "UNKNOWN_TOOL"


async def test_r_vis_04_own_registration_shadows_and_runs() -> None:
    reg = registry_with("t")
    shadow = make_tool("t", value="scoped")
    reg.scope("agent").register(shadow)
    assert names(reg, "agent") == ["t"]
    assert reg.definitions("agent") == [shadow]
    assert text_of(await run(reg, "t", scope="agent")) == "scoped"
    assert text_of(await run(reg, "t")) == "global:t"


def test_r_vis_05_the_nearer_ancestor_wins_a_name() -> None:
    reg = registry_with("t")
    far, near = make_tool("t", value="far"), make_tool("t", value="near")
    reg.scope("a").register(far)
    reg.scope("b", parent="a").register(near)
    reg.scope("c", parent="b")
    assert reg.get("t", "c") is near
    assert reg.get("t", "a") is far


# ---------------------------------------------------------------- R-VIS-06..08
def test_r_vis_06_view_order_keeps_shadow_positions() -> None:
    reg = registry_with("a", "b", "c")
    scoped = reg.scope("agent")
    scoped.register(make_tool("z"))
    shadow_b = make_tool("b", value="scoped")
    scoped.register(shadow_b)
    assert names(reg, "agent") == ["a", "b", "c", "z"]
    assert reg.get("b", "agent") is shadow_b


def test_r_vis_06_ancestor_names_follow_globals_farthest_first() -> None:
    reg = registry_with("g1", "g2")
    reg.scope("far").register(make_tool("f"))
    reg.scope("far").register(make_tool("g1", value="far-shadow"))
    reg.scope("near", parent="far").register(make_tool("n"))
    reg.scope("me", parent="near").register(make_tool("own"))
    reg.scope("me").present_as("both")
    assert names(reg, "me") == ["g1", "g2", "f", "n", "own", RESERVED_TOOL_NAME]


def test_r_vis_07_a_filtered_shadow_moves_to_the_end() -> None:
    reg = registry_with("a", "b", "c")
    scoped = reg.scope("agent")
    scoped.register(make_tool("z"))
    scoped.register(make_tool("b", value="own"))
    assert names(reg, "agent") == ["a", "b", "c", "z"]
    scoped.restrict(deny=["b"])
    assert names(reg, "agent") == ["a", "c", "z", "b"]


def test_r_vis_08_a_silent_scope_sees_the_global_view_plus_ancestors() -> None:
    reg = registry_with("a", "b")
    assert reg.schemas("silent") == reg.schemas()
    reg.scope("parent").register(make_tool("p"))
    reg.scope("silent-child", parent="parent")
    assert names(reg, "silent-child") == ["a", "b", "p"]


# ---------------------------------------------------------------- R-VIS-09..12
def test_r_vis_09_global_restrict_fails_before_the_empty_filter_check() -> None:
    reg = registry_with("a")
    for call in (lambda: reg.restrict(), lambda: reg.restrict(deny=["a"])):
        with pytest.raises(ValueError) as info:
            call()
        assert UNSCOPED[0] in str(info.value)
        assert UNSCOPED[1] in str(info.value)


def test_r_vis_10_an_empty_filter_is_refused() -> None:
    reg = registry_with("a")
    with pytest.raises(ValueError, match=re.escape(EMPTY)):
        reg.scope("agent").restrict()


def test_r_vis_11_empty_allow_hides_every_inherited_tool() -> None:
    reg = registry_with("a", "b")
    reg.scope("agent").register(make_tool("own"))
    reg.scope("agent").restrict(allow=[])
    assert names(reg, "agent") == ["own"]


def test_r_vis_12_empty_deny_changes_nothing() -> None:
    reg = registry_with("a", "b")
    reg.scope("agent").restrict(deny=[])
    assert names(reg, "agent") == ["a", "b"]


# ---------------------------------------------------------------- R-VIS-13..17
def test_r_vis_13_allow_keeps_and_deny_removes() -> None:
    reg = registry_with("a", "b", "c")
    reg.scope("allowing").restrict(allow=["a", "c"])
    reg.scope("denying").restrict(deny=["a"])
    assert names(reg, "allowing") == ["a", "c"]
    assert names(reg, "denying") == ["b", "c"]


def test_r_vis_14_deny_wins_within_one_filter() -> None:
    reg = registry_with("a", "b", "c")
    reg.scope("agent").restrict(allow=["a", "b"], deny=["b"])
    assert names(reg, "agent") == ["a"]


def test_r_vis_15_restrictions_intersect_and_lift_independently() -> None:
    reg = registry_with("a", "b", "c")
    scoped = reg.scope("agent")
    lift_allow = scoped.restrict(allow=["a", "b"])
    lift_deny = scoped.restrict(deny=["b"])
    assert names(reg, "agent") == ["a"]
    lift_allow()
    assert names(reg, "agent") == ["a", "c"]
    lift_deny()
    assert names(reg, "agent") == ["a", "b", "c"]


def test_r_vis_16_filters_are_snapshotted_at_restrict_time() -> None:
    reg = registry_with("a", "b", "c")
    allow, deny = ["a", "b"], ["b"]
    reg.scope("agent").restrict(allow=allow, deny=deny)
    allow.append("c")
    deny.clear()
    assert names(reg, "agent") == ["a"]


def test_r_vis_17_masks_apply_to_globals_registered_later() -> None:
    reg = registry_with("a", "b")
    reg.scope("denying").restrict(deny=["a"])
    reg.scope("allowing").restrict(allow=["a"])
    reg.register(make_tool("late"))
    assert names(reg, "denying") == ["b", "late"]
    assert names(reg, "allowing") == ["a"]


# ---------------------------------------------------------------- R-VIS-18..22
def test_r_vis_18_own_registrations_are_exempt_from_every_restriction() -> None:
    reg = registry_with("a")
    reg.scope("parent").restrict(allow=["a"])
    child = reg.scope("child", parent="parent")
    child.register(make_tool("own"))
    child.restrict(allow=["a"])
    child.restrict(deny=["a"])
    assert names(reg, "child") == ["own"]


def test_r_vis_19_a_child_can_deny_what_its_parent_registered() -> None:
    reg = registry_with("g")
    reg.scope("parent").register(make_tool("p"))
    reg.scope("child", parent="parent").restrict(deny=["p"])
    assert names(reg, "child") == ["g"]
    assert names(reg, "parent") == ["g", "p"]


def test_r_vis_20_an_ancestor_restriction_reaches_every_nested_scope() -> None:
    reg = registry_with("a", "b")
    reg.scope("root").restrict(deny=["a"])
    reg.scope("mid", parent="root")
    reg.scope("leaf", parent="mid")
    for scope in ("root", "mid", "leaf"):
        assert names(reg, scope) == ["b"], scope


def test_r_vis_21_a_child_restriction_never_changes_its_parent() -> None:
    reg = registry_with("a", "b")
    reg.scope("child", parent="parent").restrict(allow=["a"])
    assert names(reg, "parent") == ["a", "b"]
    assert names(reg) == ["a", "b"]


def test_r_vis_22_an_ancestor_allow_hides_its_own_tools_from_descendants() -> None:
    reg = registry_with("read")
    parent = reg.scope("parent")
    parent.register(make_tool("bash"))
    parent.restrict(allow=["read"])
    reg.scope("child", parent="parent")
    assert names(reg, "parent") == ["read", "bash"]
    assert names(reg, "child") == ["read"]
    with pytest.raises(ValueError, match='unknown global tool "bash"'):
        parent.restrict(allow=["bash"])


# ---------------------------------------------------------------- R-VIS-23..28
def test_r_vis_23_unknown_names_are_listed_with_the_known_globals() -> None:
    reg = registry_with("b", "a")
    with pytest.raises(ValueError) as info:
        reg.scope("agent").restrict(allow=["x"])
    assert str(info.value) == ('restrict() names unknown global tool "x"; known global tools: a, b')


def test_r_vis_23_several_unknown_names_keep_order_and_duplicates() -> None:
    reg = registry_with("a")
    with pytest.raises(ValueError) as info:
        reg.scope("agent").restrict(allow=["y", "a", "x"], deny=["y"])
    assert str(info.value) == (
        'restrict() names unknown global tools "y", "x", "y"; known global tools: a'
    )


def test_r_vis_23_known_list_is_none_when_nothing_is_inherited() -> None:
    reg = ToolRegistry()
    with pytest.raises(ValueError) as info:
        reg.scope("agent").restrict(deny=["x"])
    assert str(info.value).endswith("; known global tools: (none)")


def test_r_vis_23_ancestor_registrations_are_restrictable() -> None:
    reg = registry_with("g")
    reg.scope("parent").register(make_tool("p"))
    reg.scope("child", parent="parent").restrict(allow=["p"])
    assert names(reg, "child") == ["p"]


def test_r_vis_24_a_scope_cannot_restrict_its_own_registration() -> None:
    reg = registry_with("g")
    scoped = reg.scope("agent")
    scoped.register(make_tool("local"))
    with pytest.raises(ValueError, match='unknown global tool "local"; known global tools: g'):
        scoped.restrict(allow=["local"])
    assert names(reg, "agent") == ["g", "local"]


def test_r_vis_25_an_inherited_and_shadowed_name_is_restrictable() -> None:
    reg = registry_with("a", "b")
    scoped = reg.scope("agent")
    own_a = make_tool("a", value="own")
    scoped.register(own_a)
    scoped.restrict(allow=["b"])
    assert names(reg, "agent") == ["b", "a"]
    assert reg.get("a", "agent") is own_a


def test_r_vis_26_names_already_hidden_are_valid_targets() -> None:
    reg = registry_with("a")
    scoped = reg.scope("agent")
    scoped.restrict(deny=["a"])
    scoped.restrict(allow=["a"])
    assert names(reg, "agent") == []


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"allow": ["run_code"]}, id="allow"),
        pytest.param({"deny": ["run_code"]}, id="deny"),
        pytest.param({"allow": ["zz"], "deny": ["run_code"]}, id="before-unknown"),
    ],
)
def test_r_vis_27_run_code_cannot_be_named(kwargs: dict[str, list[str]]) -> None:
    reg = registry_with("a", mode="code")
    with pytest.raises(ValueError, match=re.escape(RESERVED)):
        reg.scope("agent").restrict(**kwargs)


def test_r_vis_28_a_restriction_outlives_the_global_it_names() -> None:
    reg = registry_with("b")
    d_a = reg.register(make_tool("a"))
    reg.scope("agent").restrict(deny=["a"])
    d_a()
    reg.register(make_tool("a", value="again"))
    assert names(reg) == ["b", "a"]
    assert names(reg, "agent") == ["b"]


# ---------------------------------------------------------------- R-VIS-29..32
@pytest.mark.parametrize("mode", ["code", "both"])
def test_r_vis_29_restrictions_never_hide_run_code(mode: str) -> None:
    reg = registry_with("a", "b", mode=mode)
    scoped = reg.scope("agent")
    scoped.restrict(allow=[])
    scoped.restrict(deny=["a"])
    assert names(reg, "agent") == [RESERVED_TOOL_NAME]
    assert reg.get(RESERVED_TOOL_NAME, "agent") is reg.get(RESERVED_TOOL_NAME)


async def test_r_vis_30_a_hidden_global_reads_as_absent_and_is_unknown() -> None:
    reg = registry_with("a", "b")
    reg.scope("agent").restrict(deny=["a"])
    assert reg.get("a", "agent") is None
    assert reg.executable("a", "agent") is None
    result = await run(reg, "a", scope="agent")
    assert code_of(result) == "UNKNOWN_TOOL"
    assert text_of(result) == 'Error: unknown tool "a"'


def test_r_vis_31_none_is_absent_and_a_string_is_rejected() -> None:
    reg = registry_with("a", "b")
    scoped = reg.scope("agent")
    with pytest.raises(ValueError, match=re.escape(EMPTY)):
        scoped.restrict(allow=None, deny=None)
    scoped.restrict(allow=None, deny=["a"])
    assert names(reg, "agent") == ["b"]
    with pytest.raises((TypeError, ValueError)):
        scoped.restrict(allow="ab")
    assert names(reg, "agent") == ["b"]


def test_r_vis_32_creating_a_scope_with_a_parent_changes_its_view_at_once() -> None:
    reg = registry_with("g")
    reg.scope("preset").register(make_tool("p"))
    events: list[int] = []
    reg.on_change(lambda: events.append(1))
    assert names(reg, "agent") == ["g"]
    reg.scope("agent", parent="preset")
    assert names(reg, "agent") == ["g", "p"]
    assert reg.get("p", "agent") is not None
    assert events == []
