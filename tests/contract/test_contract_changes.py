"""Contract: change events (``on_change``) and ``set_executor`` on both backends.

R-EVT: one event per registration, restriction and mode and per disposal of one, none for
guards and hooks, never scope-filtered; disposing a scope emits one per contribution it
owned (R-EVT-07). On Ray the listener runs in the driver, and a write returns only after
its own event was delivered, so the counts read the same right after each write.
``set_executor`` serves its scope's batches (on Ray: inside the executor actor).
"""

from __future__ import annotations

from tests import tools
from tests.contract.conftest import SCOPES, Backend, success, wires
from toolray import ToolCall

A, B = SCOPES


async def test_change_events_follow_the_registry_rules_r_evt(backend: Backend) -> None:
    name = backend.name("evt")
    events: list[str] = []
    backend.own(backend.registry.on_change(lambda: events.append("global")))
    backend.own(backend.context(A).on_change(lambda: events.append("scoped")))
    counts = []
    lift = backend.register(tools.constant_tool(name, "e"))  # R-EVT-01: one event
    counts.append(len(events))
    unmask = backend.restrict(B, deny=[name])  # R-EVT-04
    counts.append(len(events))
    backend.guard(tools.deny_guard(name, "no"))  # R-EVT-06: none
    backend.own(backend.context(B).on_result(lambda e, r: None))  # hooks: none
    counts.append(len(events))
    unmask()
    lift()  # R-EVT-02
    lift()  # idempotent: nothing more
    counts.append(len(events))
    assert backend.agree(counts) == [2, 4, 4, 8]
    assert events == ["global", "scoped"] * 4  # R-EVT-08: the scoped listener sees all


async def test_disposing_a_scope_emits_one_event_per_contribution_r_evt_07(
    backend: Backend,
) -> None:
    key = backend.name("evt-scope")
    events: list[int] = []
    backend.own(backend.registry.on_change(lambda: events.append(1)))
    scope = backend.registry.scope(key)
    scope.register(tools.constant_tool(backend.name("one"), "1"))
    scope.register(tools.constant_tool(backend.name("two"), "2"))
    scope.present_as("both")
    scope.guard(tools.deny_guard("x", "x"))
    before = len(events)
    scope.dispose()
    assert backend.agree([before, len(events)]) == [3, 6]


async def test_a_listener_is_disposable(backend: Backend) -> None:
    events: list[int] = []
    stop = backend.registry.on_change(lambda: events.append(1))
    backend.register(tools.constant_tool(backend.name("a"), "a"))
    stop()
    backend.register(tools.constant_tool(backend.name("b"), "b"))
    assert backend.agree(len(events)) == 1


async def test_a_scoped_executor_serves_its_scope(backend: Backend) -> None:
    name = backend.name("served")
    backend.register(tools.constant_tool(name, "default-ran"))
    lift = backend.context(A).set_executor(tools.RecordingExecutor("custom"))
    calls = [ToolCall("c1", name, "{}"), ToolCall("c2", backend.name("nope"), "{}")]
    in_a = await backend.run(calls, A)
    assert wires(in_a) == [("c1", success("custom:c1")), ("c2", success("custom:c2"))]
    in_b = await backend.run(calls[:1], B)
    assert wires(in_b) == [("c1", success("default-ran"))]
    lift()
    back = await backend.run(calls[:1], A)
    assert wires(back) == [("c1", success("default-ran"))]
