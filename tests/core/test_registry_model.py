"""The visibility rule against a reference model, and cached views that never go stale.

The reference model (``Model``) is the rule of R-COND-01 with shadowing, written from the
spec: inherited names are the global tools overlaid with every ancestor layer (farthest
first; a nearer entry replaces a name in place, R-VIS-05/06), kept only if every restriction
of every layer on the chain admits them (R-COND-01, R-VIS-18..22), then the scope's own
registrations are applied last, unfiltered, keeping a shadowed name's position or going to
the end (R-VIS-06/07). Hypothesis drives random register / dispose / restrict / lift /
scope-create sequences over a small name alphabet and a scope tree of depth ≤ 3 and compares
``[s["name"] for s in registry.schemas(scope)]`` for the global view and every scope key
(created or not: a key that was never created sees the global view, R-VIS-08) after every
step. Misuse (a duplicate name, a restriction naming what the scope does not inherit) must
be refused by both.

The registry caches views; the second half proves that a warm cache reflects every kind of
change at once, through every read path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolray import RESERVED_TOOL_NAME, Disposer, ToolRegistry

from ._registry_helpers import make_tool, mode_input, names, resolve

ALPHABET = ("a", "b", "c", "d")
SCOPES = ("s1", "s2", "s3", "s4")
MAX_DEPTH = 3


# ---------------------------------------------------------------- the reference model
@dataclass
class Restriction:
    allow: frozenset[str] | None
    deny: frozenset[str] | None

    def admits(self, name: str) -> bool:
        return (self.allow is None or name in self.allow) and (
            self.deny is None or name not in self.deny
        )


@dataclass
class Model:
    parents: dict[str, str | None] = field(default_factory=dict)
    tools: dict[str | None, list[str]] = field(default_factory=lambda: {None: []})
    restrictions: dict[str, list[Restriction]] = field(default_factory=dict)

    def chain(self, key: str) -> list[str]:
        out = [key]
        while (parent := self.parents.get(out[-1])) is not None:
            out.append(parent)
        return out[::-1]

    def depth(self, key: str) -> int:
        return len(self.chain(key)) if key in self.parents else 0

    def create(self, key: str, parent: str | None = None) -> None:
        if parent is not None and parent not in self.parents:
            self.create(parent)
        self.parents.setdefault(key, parent)

    def layer(self, key: str | None) -> list[str]:
        return self.tools.setdefault(key, [])

    def restrictable(self, key: str) -> set[str]:
        known = set(self.layer(None))
        for ancestor in self.chain(key)[:-1]:
            known.update(self.layer(ancestor))
        return known

    def view(self, key: str | None) -> list[str]:
        if key is None:
            return list(self.layer(None))
        chain = self.chain(key)
        inherited: dict[str, None] = {}
        for layer in (None, *chain[:-1]):
            inherited.update(dict.fromkeys(self.layer(layer)))
        masks = [r for k in chain for r in self.restrictions.get(k, [])]
        visible = {n: None for n in inherited if all(m.admits(n) for m in masks)}
        visible.update(dict.fromkeys(self.layer(key)))
        return list(visible)


# ---------------------------------------------------------------- operations
names_subset = st.lists(st.sampled_from(ALPHABET), max_size=3)
layer_keys = st.sampled_from((None, *SCOPES))
operations = st.one_of(
    st.tuples(st.just("register"), layer_keys, st.sampled_from(ALPHABET)),
    st.tuples(st.just("dispose"), st.integers(0, 30)),
    st.tuples(
        st.just("restrict"),
        st.sampled_from(SCOPES),
        st.none() | names_subset,
        st.none() | names_subset,
    ).filter(lambda op: op[2] is not None or op[3] is not None),
    st.tuples(st.just("lift"), st.integers(0, 30)),
    st.tuples(st.just("create"), st.sampled_from(SCOPES), st.none() | st.sampled_from(SCOPES)),
)


class Harness:
    """Applies one operation to the registry and the model alike."""

    def __init__(self) -> None:
        self.reg = ToolRegistry()
        self.model = Model()
        self.registrations: list[tuple[Disposer, str | None, str]] = []
        self.lifts: list[tuple[Disposer, str, Restriction]] = []

    def context(self, key: str | None) -> Any:
        if key is None:
            return self.reg
        self.model.create(key)
        return self.reg.scope(key)

    def register(self, key: str | None, name: str) -> None:
        context = self.context(key)
        if name in self.model.layer(key):
            with pytest.raises(ValueError):
                context.register(make_tool(name))
            return
        self.registrations.append((context.register(make_tool(name)), key, name))
        self.model.layer(key).append(name)

    def dispose(self, index: int) -> None:
        if self.registrations:
            disposer, key, name = self.registrations.pop(index % len(self.registrations))
            disposer()
            self.model.layer(key).remove(name)

    def restrict(self, key: str, allow: list[str] | None, deny: list[str] | None) -> None:
        context = self.context(key)
        named = [*(allow or ()), *(deny or ())]
        if not set(named) <= self.model.restrictable(key):
            with pytest.raises(ValueError):
                context.restrict(allow=allow, deny=deny)
            return
        mask = Restriction(
            None if allow is None else frozenset(allow), None if deny is None else frozenset(deny)
        )
        self.lifts.append((context.restrict(allow=allow, deny=deny), key, mask))
        self.model.restrictions.setdefault(key, []).append(mask)

    def lift(self, index: int) -> None:
        if self.lifts:
            disposer, key, mask = self.lifts.pop(index % len(self.lifts))
            disposer()
            self.model.restrictions[key].remove(mask)

    def create(self, key: str, parent: str | None) -> None:
        if key in self.model.parents or parent == key:
            return
        parent_depth = 0 if parent is None else max(self.model.depth(parent), 1)
        if parent_depth + 1 > MAX_DEPTH:
            return
        scoped = self.reg.scope(key, parent=parent)
        self.model.create(key, parent)
        assert (scoped.key, scoped.parent) == (key, parent)

    def apply(self, op: tuple[Any, ...]) -> None:
        getattr(self, op[0])(*op[1:])

    def check(self, step: int) -> None:
        for key in (None, *SCOPES):
            assert names(self.reg, key) == self.model.view(key), (step, key)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(st.lists(operations, max_size=25))
def test_r_cond_01_r_vis_06_r_vis_07_r_vis_18_r_vis_22_registry_agrees_with_the_reference_model(
    ops: list[tuple[Any, ...]],
) -> None:
    harness = Harness()
    for step, op in enumerate(ops):
        harness.apply(op)
        harness.check(step)


def test_model_sanity_r_vis_22_ancestor_allow_hides_its_own_tools() -> None:
    model = Model()
    model.tools[None] = ["read"]
    model.create("child", "parent")
    model.tools["parent"] = ["bash"]
    model.restrictions["parent"] = [Restriction(frozenset({"read"}), None)]
    assert model.view("parent") == ["read", "bash"]
    assert model.view("child") == ["read"]


# ---------------------------------------------------------------- cached views stay fresh
def chain_registry() -> ToolRegistry:
    """Globals a, b; root owns r; chain root → mid → leaf; every read path warmed."""
    reg = ToolRegistry()
    reg.register(make_tool("a"))
    reg.register(make_tool("b", is_concurrency_safe=lambda args: True))
    reg.scope("root").register(make_tool("r"))
    reg.scope("mid", parent="root")
    reg.scope("leaf", parent="mid")
    warm(reg)
    return reg


def warm(reg: ToolRegistry) -> None:
    for _ in range(2):
        for scope in (None, "root", "mid", "leaf"):
            names(reg, scope)
            reg.definitions(scope)
            for name in ("a", "b", "r", "new", RESERVED_TOOL_NAME):
                reg.get(name, scope)
                reg.executable(name, scope)
                reg.execution_mode(mode_input(name, scope=scope))


def reads(reg: ToolRegistry, scope: str) -> dict[str, Any]:
    return {
        "schemas": names(reg, scope),
        "definitions": [d.name for d in reg.definitions(scope)],
        "get": sorted(n for n in ("a", "b", "r", "new") if reg.get(n, scope) is not None),
        "executable": sorted(
            n for n in ("a", "b", "r", "new") if reg.executable(n, scope) is not None
        ),
    }


def same(listing: list[str]) -> dict[str, Any]:
    visible = [n for n in listing if n != RESERVED_TOOL_NAME]
    return {
        "schemas": listing,
        "definitions": visible,
        "get": sorted(visible),
        "executable": sorted(visible),
    }


CHANGES: dict[str, tuple[Callable[[ToolRegistry], Any], list[str]]] = {
    "register-global": (lambda reg: reg.register(make_tool("new")), ["a", "b", "new", "r"]),
    "register-ancestor": (
        lambda reg: reg.scope("mid").register(make_tool("new")),
        ["a", "b", "r", "new"],
    ),
    "register-own": (
        lambda reg: reg.scope("leaf").register(make_tool("new")),
        ["a", "b", "r", "new"],
    ),
    "shadow-own": (lambda reg: reg.scope("leaf").register(make_tool("a")), ["a", "b", "r"]),
    "restrict-own": (lambda reg: reg.scope("leaf").restrict(deny=["a"]), ["b", "r"]),
    "restrict-ancestor": (lambda reg: reg.scope("root").restrict(allow=["b"]), ["b"]),
    "present-as-ancestor": (
        lambda reg: reg.scope("mid").present_as("both"),
        ["a", "b", "r", RESERVED_TOOL_NAME],
    ),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_cached_reads_reflect_a_change_and_its_disposal_at_once(change: str) -> None:
    reg = chain_registry()
    apply, expected = CHANGES[change]
    before = reads(reg, "leaf")
    assert before == same(["a", "b", "r"])
    dispose = apply(reg)
    assert reads(reg, "leaf") == same(expected)
    warm(reg)
    dispose()
    assert reads(reg, "leaf") == before


def test_cached_reads_reflect_disposal_of_a_global_tool() -> None:
    reg = chain_registry()
    reg.register(make_tool("gone"))()  # registered, read nowhere, disposed
    warm(reg)
    lift = reg.scope("leaf").restrict(deny=["b"])
    warm(reg)
    lift()
    assert reg.execution_mode(mode_input("b", scope="leaf")) == "parallel"
    reg.scope("root").dispose()
    assert reads(reg, "leaf") == same(["a", "b"])
    assert reads(reg, "root") == same(["a", "b"])


def test_cached_reads_reflect_a_scope_disposal() -> None:
    reg = chain_registry()
    mid = reg.scope("mid")
    mid.register(make_tool("new"))
    mid.restrict(deny=["a"])
    mid.present_as("code")
    warm(reg)
    assert reads(reg, "leaf")["schemas"] == ["b", "r", "new", RESERVED_TOOL_NAME]
    assert reg.execution_mode(mode_input("b", scope="leaf")) == "exclusive"  # collapsed
    mid.dispose()
    assert reads(reg, "leaf") == same(["a", "b", "r"])
    assert reg.execution_mode(mode_input("b", scope="leaf")) == "parallel"


def test_cached_mode_reads_reflect_registration_changes() -> None:
    reg = chain_registry()
    assert reg.execution_mode(mode_input("b", scope="leaf")) == "parallel"
    reg.scope("leaf").register(make_tool("b"))
    assert reg.execution_mode(mode_input("b", scope="leaf")) == "exclusive"


async def test_a_cached_step_set_reflects_changes_at_once() -> None:
    reg = chain_registry()
    reg.register(make_tool("cond"), when=lambda context: True)
    tool_set = await resolve(reg, "leaf")
    for _ in range(2):
        assert list(tool_set.view("leaf")) == ["a", "b", "cond", "r"]
    lift = reg.scope("leaf").restrict(deny=["cond"])
    assert list(tool_set.view("leaf")) == ["a", "b", "r"]
    assert reg.executable("cond", "leaf", tool_set) is None
    lift()
    reg.scope("root").dispose()
    assert "r" not in tool_set.view("leaf")
    assert names(reg, "leaf", tool_set) == ["a", "b", "cond"]
