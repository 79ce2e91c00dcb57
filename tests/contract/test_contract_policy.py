"""Contract: visibility and policy — scoped restriction, scoped shadowing, guards.

Both backends run every batch from a scope (the Ray executor actor is per scope); the
registrations live in the registry (in-process) or the registry actor (Ray), and their
effects must read the same from the results.
"""

from __future__ import annotations

from tests import tools
from tests.contract.conftest import SCOPES, Backend, failure, success, values, wires
from toolray import ToolCall

A, B = SCOPES


def _unknown(name: str) -> dict[str, object]:
    return failure(f'unknown tool "{name}"', "ToolNotFoundError", "UNKNOWN_TOOL")


async def test_a_scoped_restriction_hides_a_tool_from_that_scope_only(backend: Backend) -> None:
    hidden, kept = backend.name("hidden"), backend.name("kept")
    backend.register(tools.constant_tool(hidden, "hidden-ran"))
    backend.register(tools.constant_tool(kept, "kept-ran"))
    calls = [ToolCall("c1", hidden, "{}"), ToolCall("c2", kept, "{}")]

    lift = backend.restrict(A, deny=[hidden])
    in_a = await backend.run(calls, A)
    assert wires(in_a) == [("c1", _unknown(hidden)), ("c2", success("kept-ran"))]
    in_b = await backend.run(calls, B)
    assert wires(in_b) == [("c1", success("hidden-ran")), ("c2", success("kept-ran"))]

    lift()
    after = await backend.run(calls, A)
    assert wires(after) == [("c1", success("hidden-ran")), ("c2", success("kept-ran"))]


async def test_an_allow_list_restriction_hides_everything_else(backend: Backend) -> None:
    hidden, kept = backend.name("hidden"), backend.name("kept")
    backend.register(tools.constant_tool(hidden, "hidden-ran"))
    backend.register(tools.constant_tool(kept, "kept-ran"))
    backend.restrict(B, allow=[kept])
    result = await backend.run([ToolCall("c1", hidden, "{}"), ToolCall("c2", kept, "{}")], B)
    assert wires(result) == [("c1", _unknown(hidden)), ("c2", success("kept-ran"))]
    assert values(result) == ["<no value>", "kept-ran"]


async def test_a_scoped_shadow_wins_over_the_global_entry(backend: Backend) -> None:
    name = backend.name("shadowed")
    backend.register(tools.constant_tool(name, "global"))
    backend.register(tools.constant_tool(name, "scoped"), scope=A)
    calls = [ToolCall("c1", name, "{}")]
    in_a = await backend.run(calls, A)
    assert wires(in_a) == [("c1", success("scoped"))]
    assert values(in_a) == ["scoped"]
    in_b = await backend.run(calls, B)
    assert wires(in_b) == [("c1", success("global"))]
    assert values(in_b) == ["global"]


async def test_a_scope_only_tool_is_unknown_elsewhere(backend: Backend) -> None:
    local = backend.name("local")
    backend.register(tools.constant_tool(local, "local-ran"), scope=A)
    calls = [ToolCall("c1", local, "{}")]
    assert wires(await backend.run(calls, A)) == [("c1", success("local-ran"))]
    assert wires(await backend.run(calls, B)) == [("c1", _unknown(local))]


async def test_a_global_guard_denies_a_call_with_its_reason(backend: Backend) -> None:
    guarded, free = backend.name("guarded"), backend.name("free")
    backend.register(tools.constant_tool(guarded, "guarded-ran"))
    backend.register(tools.constant_tool(free, "free-ran"))
    backend.guard(tools.deny_guard(guarded, "terminal policy"))
    calls = [
        ToolCall("c1", guarded, "{}"),
        ToolCall("c2", free, "{}"),
        ToolCall("c3", guarded, "{}"),
    ]
    for scope in (A, B):
        result = await backend.run(calls, scope)
        assert wires(result) == [
            ("c1", failure("terminal policy")),
            ("c2", success("free-ran")),
            ("c3", failure("terminal policy")),
        ], scope
        assert values(result) == ["<no value>", "free-ran", "<no value>"]


async def test_a_scoped_guard_applies_to_its_scope_only(backend: Backend) -> None:
    guarded = backend.name("guarded")
    backend.register(tools.constant_tool(guarded, "guarded-ran"))
    backend.guard(tools.deny_guard(guarded, "not in this scope"), scope=A)
    calls = [ToolCall("c1", guarded, "{}")]
    assert wires(await backend.run(calls, A)) == [("c1", failure("not in this scope"))]
    assert wires(await backend.run(calls, B)) == [("c1", success("guarded-ran"))]
