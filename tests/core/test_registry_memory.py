"""Bounded memory: disposing a scope frees everything it held.

After a warm-up, thousands of created-and-disposed scopes — each with a tool, a restriction,
views and a batch — leave the Python heap where it was: no layer, parent entry, cached view,
chain, listener or definition of a disposed scope stays reachable.
"""

from __future__ import annotations

import gc
import tracemalloc

from tests.core._registry_helpers import make_tool
from toolray import AbortController, ToolBatchInput, ToolCall, ToolRegistry

WARM_UP = 1_000
MEASURED = 5_000
BUDGET_BYTES = 512 * 1024


def _registry() -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(make_tool("shared"))
    reg.register(make_tool("hidden"))
    return reg


async def _one_scope(reg: ToolRegistry, i: int) -> None:
    key = f"agent-{i}"
    scope = reg.scope(key, parent="farm")
    scope.register(make_tool(f"own-{i}", value="x" * 64))
    scope.restrict(deny=["hidden"])
    scope.on_change(lambda: None)
    scope.guard(lambda execution: None)
    assert [s["name"] for s in reg.schemas(key)] == ["shared", f"own-{i}"]
    assert len(reg.definitions(key)) == 2
    calls = [
        ToolCall(f"c{i}", f"own-{i}", "{}"),
        ToolCall(f"d{i}", "shared", {"a": 1}),
        ToolCall(f"e{i}", "shared", 42),  # type: ignore[arg-type]
    ]
    result = await reg.execute_batch(ToolBatchInput(calls, AbortController().signal, scope=key))
    assert [r.result.is_error for r in result.results] == [False, False, True]
    scope.dispose()


def _heap() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


async def test_disposed_scopes_leave_the_heap_bounded() -> None:
    reg = _registry()
    reg.scope("farm")
    for i in range(WARM_UP):
        await _one_scope(reg, i)
    tracemalloc.start()
    try:
        before = _heap()
        for i in range(WARM_UP, WARM_UP + MEASURED):
            await _one_scope(reg, i)
        grown = _heap() - before
    finally:
        tracemalloc.stop()
    assert grown <= BUDGET_BYTES, f"the heap grew by {grown / 1024:.0f} KiB"
    stats = reg.stats()
    assert (stats.scopes, stats.layers) == (1, 1)  # "farm" (no layer) and the global layer


def test_dispose_forgets_the_scope_and_its_views() -> None:
    reg = _registry()
    reg.scope("p")
    before = reg.stats()
    scope = reg.scope("a", parent="p")
    scope.register(make_tool("own"))
    assert [s["name"] for s in reg.schemas("a")] == ["shared", "hidden", "own"]
    assert reg.executable("own", "a") is not None
    scope.dispose()
    after = reg.stats()
    assert (after.scopes, after.layers, after.tools) == (before.scopes, 1, 2)
    assert after.cached_views == before.cached_views
    assert reg.scope("a", parent="q").parent == "q"  # the key is free again


def test_a_disposed_parent_keeps_its_binding_while_a_child_inherits_through_it() -> None:
    reg = _registry()
    reg.scope("root").register(make_tool("from-root"))
    middle = reg.scope("middle", parent="root")
    child = reg.scope("child", parent="middle")
    middle.dispose()
    assert "from-root" in [s["name"] for s in reg.schemas("child")]
    child.dispose()
    assert reg.stats().scopes == 1  # only "root" is left
    assert reg.scope("middle").parent is None  # nothing of the old binding remains


def test_reads_of_keys_that_are_no_scope_keep_the_view_cache_bounded() -> None:
    reg = _registry()
    for i in range(2_000):
        assert reg.get("shared", f"stranger-{i}") is not None
    assert reg.stats().cached_views <= 300
