"""R-EVT: the ``on_change`` notification (upstream ``tools/change``).

Not built: Code Mode runtime / invariant companion. R-EVT-10's "code runtime/language
changes" and R-EVT-11 (the invariant companion ignores ``tools/change``) have no Python
counterpart; R-EVT-10's parent-binding half is tested (scope creation with a parent).
R-INV-01..07 (an invariant companion: stage-order, frozen-result and
code-dispatch checks raising ``InvariantError``) are not built either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from toolray import (
    RESERVED_TOOL_NAME,
    JsonSchemaError,
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
)

from ._registry_helpers import make_tool, names


class Recorder:
    """An ``on_change`` listener that takes no arguments and snapshots a probe each time."""

    def __init__(self, probe: Callable[[], Any] = lambda: None) -> None:
        self.probe = probe
        self.seen: list[Any] = []

    def __call__(self) -> None:
        self.seen.append(self.probe())

    @property
    def count(self) -> int:
        return len(self.seen)


def bad_output(name: str) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=None,
        parameters={},
        output=None,  # type: ignore[arg-type]
        execute=lambda a, c: None,
    )


# ---------------------------------------------------------------- R-EVT-01 / 02
def test_r_evt_01_register_emits_once_after_the_tool_is_visible() -> None:
    reg = ToolRegistry()
    rec = Recorder(lambda: reg.get("t") is not None)
    reg.on_change(rec)
    reg.register(make_tool("t"))
    assert rec.seen == [True]


def test_r_evt_02_the_disposer_emits_once_after_removal() -> None:
    reg = ToolRegistry()
    dispose = reg.register(make_tool("t"))
    rec = Recorder(lambda: reg.get("t") is None)
    reg.on_change(rec)
    dispose()
    dispose()
    assert rec.seen == [True]


# ---------------------------------------------------------------- R-EVT-03
@pytest.mark.parametrize(
    "definition",
    [
        pytest.param(bad_output("t"), id="output"),
        pytest.param(
            ToolDefinition(
                name="t",
                description=None,
                parameters={},
                output=ToolOutput(schema={"type": "tuple"}, render=lambda a, v: []),
                execute=lambda a, c: None,
            ),
            id="schema",
        ),
        pytest.param(make_tool("t", timeout_ms=0), id="timeout"),
        pytest.param(make_tool(RESERVED_TOOL_NAME), id="reserved"),
        pytest.param(make_tool("dup", value="second"), id="duplicate"),
    ],
)
def test_r_evt_03_a_failed_register_emits_and_inserts_nothing(definition: ToolDefinition) -> None:
    reg = ToolRegistry()
    first = make_tool("dup")
    reg.register(first)
    rec = Recorder()
    reg.on_change(rec)
    with pytest.raises((TypeError, ValueError, JsonSchemaError)):
        reg.register(definition)
    with pytest.raises((TypeError, ValueError, JsonSchemaError)):
        reg.scope("agent").register(definition if definition.name != "dup" else bad_output("x"))
    assert rec.count == 0
    assert names(reg) == ["dup"]
    assert names(reg, "agent") == ["dup"]
    assert reg.get("dup") is first


# ---------------------------------------------------------------- R-EVT-04..06
def test_r_evt_04_restrict_and_its_disposer_emit_once_each() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("a"))
    rec = Recorder(lambda: names(reg, "agent"))
    reg.on_change(rec)
    lift = reg.scope("agent").restrict(deny=["a"])
    assert rec.seen == [[]]
    lift()
    lift()
    assert rec.seen == [[], ["a"]]


def test_r_evt_05_present_as_and_its_disposer_emit_once_each() -> None:
    reg = ToolRegistry()
    rec = Recorder(lambda: names(reg, "agent"))
    reg.on_change(rec)
    dispose = reg.scope("agent").present_as("code")
    assert rec.seen == [[RESERVED_TOOL_NAME]]
    dispose()
    dispose()
    assert rec.seen == [[RESERVED_TOOL_NAME], []]


def test_r_evt_06_guards_and_scope_creation_emit_nothing() -> None:
    reg = ToolRegistry()
    rec = Recorder()
    reg.on_change(rec)
    reg.scope("agent")
    reg.scope("child", parent="preset")
    lift_global = reg.guard(lambda execution: None)
    lift_scoped = reg.scope("agent").guard(lambda execution: "no")
    lift_global()
    lift_scoped()
    assert rec.count == 0


# ---------------------------------------------------------------- R-EVT-07 / 08
def test_r_evt_07_scope_disposal_emits_once_per_owned_contribution() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("g"))
    scoped = reg.scope("agent")
    scoped.register(make_tool("a"))
    scoped.register(make_tool("b"))
    scoped.restrict(deny=["g"])
    scoped.present_as("both")
    scoped.guard(lambda execution: None)
    rec = Recorder()
    reg.on_change(rec)
    scoped.dispose()
    assert rec.count == 4  # two tools, one restriction, one mode; the guard emits nothing


def test_r_evt_08_listeners_take_no_arguments_and_are_not_scope_filtered() -> None:
    reg = ToolRegistry()
    rec = Recorder()
    reg.scope("listener").on_change(rec)
    reg.register(make_tool("g"))
    reg.scope("other").register(make_tool("o"))
    reg.scope("listener").register(make_tool("own"))
    assert rec.count == 3


def test_r_evt_08_on_change_disposer_stops_notifications() -> None:
    reg = ToolRegistry()
    rec = Recorder()
    stop = reg.on_change(rec)
    reg.register(make_tool("a"))
    stop()
    reg.register(make_tool("b"))
    assert rec.count == 1


# ---------------------------------------------------------------- R-EVT-09
def test_r_evt_09_a_throwing_listener_rolls_the_registration_back() -> None:
    reg = ToolRegistry()
    boom = RuntimeError("listener failed")
    seen: list[bool] = []

    def listener() -> None:
        seen.append(reg.get("t") is not None)
        if len(seen) == 1:
            raise boom

    stop = reg.on_change(listener)
    with pytest.raises(RuntimeError) as info:
        reg.register(make_tool("t"))
    assert info.value is boom
    assert seen == [True, False]
    assert reg.get("t") is None
    assert reg.schemas() == []
    stop()
    fresh = make_tool("t")
    reg.register(fresh)
    assert reg.get("t") is fresh


def test_r_evt_09_a_second_failure_on_rollback_replaces_the_first() -> None:
    reg = ToolRegistry()
    errors = iter([RuntimeError("first"), RuntimeError("second")])
    raised: list[RuntimeError] = []

    def listener() -> None:
        error = next(errors)
        raised.append(error)
        raise error

    reg.on_change(listener)
    with pytest.raises(RuntimeError) as info:
        reg.register(make_tool("t"))
    assert [str(e) for e in raised] == ["first", "second"]
    assert info.value is raised[1]
    assert reg.get("t") is None


# ---------------------------------------------------------------- R-EVT-10
def test_r_evt_10_parent_binding_emits_no_change() -> None:
    reg = ToolRegistry()
    reg.scope("preset").register(make_tool("p"))
    rec = Recorder()
    reg.on_change(rec)
    reg.scope("agent", parent="preset")
    assert names(reg, "agent") == ["p"]
    assert rec.count == 0
