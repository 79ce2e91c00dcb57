"""``toolray.lowlevel``: the documented namespace runtimes such as ``toolray_actors`` use."""

from __future__ import annotations

import toolray
import toolray.lowlevel as lowlevel
from toolray import ToolRegistry

EXPECTED = {
    "OPEN_ENDED",
    "BatchStatistics",
    "BodyRunner",
    "Call",
    "Entry",
    "InvalidArguments",
    "LocalNested",
    "NestedDispatcher",
    "Stage",
    "ChainRunner",
    "Link",
    "SystemClock",
    "ToolLookup",
    "admitted_entries",
    "chain_entries",
    "current_runner",
    "cut",
    "failure_from",
    "has_scope",
    "nested_input",
    "not_a_definition",
    "is_json",
    "joins",
    "next_stage",
    "not_live",
    "parse_arguments",
    "plan_stages",
    "run_body_inline",
    "run_nested",
    "run_pipeline",
    "scope_parent",
    "thaw_json",
    "tool_set_of",
    # the observer seam and trace context
    "TOOL_ERROR",
    "BatchStart",
    "CallEnd",
    "CallStart",
    "Observation",
    "Observer",
    "TraceParent",
    "activated",
    "end_batch",
    "observe",
    "outcome_of",
    "record_call",
    "register_local_spans",
    "start_batch",
    # environments: the backend seam and the instances over it
    "NO_ENVIRONMENT",
    "EnvironmentBackend",
    "EnvironmentEvent",
    "watch_environments",
    "EnvironmentService",
    "InstanceCounts",
    "InstanceRef",
    "Instances",
    "Parked",
    "failed_error",
    "invoke",
    "lost_error",
    "restore_state",
    "snapshot_state",
}


def test_lowlevel_is_curated_and_documented() -> None:
    names = lowlevel.__all__
    assert isinstance(names, tuple)
    assert set(names) == EXPECTED
    assert all(hasattr(lowlevel, name) for name in names)
    assert "not for applications" in " ".join((lowlevel.__doc__ or "").split())
    assert "lowlevel" not in toolray.__all__  # a namespace of its own, not part of toolray's


def test_has_scope_and_scope_parent_read_the_scope_tree() -> None:
    reg = ToolRegistry()
    assert not lowlevel.has_scope(reg, "child")
    assert lowlevel.scope_parent(reg, "child") is None
    child = reg.scope("child", parent="root")
    assert lowlevel.has_scope(reg, "child")
    assert lowlevel.has_scope(reg, "root")
    assert lowlevel.scope_parent(reg, "child") == "root"
    assert lowlevel.scope_parent(reg, "root") is None
    child.dispose()
    assert not lowlevel.has_scope(reg, "child")
    assert lowlevel.scope_parent(reg, "child") is None


def test_json_helpers() -> None:
    frozen = toolray.snapshot_json({"a": [1]})
    thawed = lowlevel.thaw_json(frozen)
    assert type(thawed) is dict
    assert type(thawed["a"]) is list
    assert lowlevel.is_json({"a": [1.5]})
    assert not lowlevel.is_json({"a": (1,)})


def test_a_registry_is_a_tool_lookup() -> None:
    """``run_pipeline`` runs over any ``ToolLookup``; the core registry is one."""
    reg: lowlevel.ToolLookup = ToolRegistry()
    assert reg.execution_mode is not None
