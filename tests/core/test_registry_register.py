"""R-REG: registration (register, its checks and disposers, construction) and scopes.

Guards (R-REG-19..22) live in ``test_registry_hooks.py`` with the other hook tables.

Python decisions and entries without a direct Python meaning:

- R-REG-04: ``output=None`` is treated like a missing output (R-REG-02's message).
- R-REG-06: ``timeout_ms=None`` means "absent" (upstream rejects ``null``).
- R-REG-18: whether an empty scoped layer is reclaimed is internal bookkeeping with no public
  observable (the registry exposes no statistics); the tests pin the observable half: reads
  and failed first contributions leave no trace in any view.
- R-REG-23: ``ToolRuntime``'s ``maxParallelSubCalls`` belongs to the Code Mode runtime (not
  built); its Python analog is the batch cap of ``BatchExecutor``.
"""

from __future__ import annotations

import inspect
import math
import re

import pytest

from toolray import (
    RESERVED_TOOL_NAME,
    BatchExecutor,
    Disposer,
    JsonSchemaError,
    ScopedTools,
    ToolDefinition,
    ToolOutput,
    ToolRegistry,
    text_block,
)

from ._registry_helpers import make_tool, names, run, text_of

RESERVED_MESSAGE = (
    'tool name "run_code" is reserved for the Code Mode presentation transport and cannot be '
    "registered or shadowed"
)


def output_message(name: str) -> str:
    return re.escape(f'tool "{name}" must declare output {{ schema, render, presentation_meta? }}')


def timeout_message(name: str) -> str:
    return re.escape(f'tool "{name}" timeout_ms must be a positive finite number')


def with_output(name: str, output: object, **fields: object) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=None,
        parameters={"type": "object"},
        output=output,  # type: ignore[arg-type]
        execute=lambda args, ctx: "x",
        **fields,  # type: ignore[arg-type]
    )


def render(args: object, value: object) -> list[dict[str, str]]:
    return [text_block(str(value))]


# ---------------------------------------------------------------- R-REG-01
def test_r_reg_01_register_returns_a_disposer_and_files_by_calling_context() -> None:
    reg = ToolRegistry()
    d_global = reg.register(make_tool("g"))
    d_scoped = reg.scope("agent").register(make_tool("s"))
    assert isinstance(d_global, Disposer)
    assert isinstance(d_scoped, Disposer)
    assert names(reg) == ["g"]
    assert names(reg, "agent") == ["g", "s"]
    assert names(reg, "other") == ["g"]


# ---------------------------------------------------------------- R-REG-02..04
@pytest.mark.parametrize(
    "output",
    [
        pytest.param(None, id="R-REG-04-none"),
        pytest.param("not-an-object", id="R-REG-02-string"),
        pytest.param(
            ToolOutput(schema={"type": "string"}, render="nope"),  # type: ignore[arg-type]
            id="R-REG-02-render-not-callable",
        ),
        pytest.param(
            ToolOutput(
                schema={"type": "string"},
                render=render,
                presentation_meta="nope",  # type: ignore[arg-type]
            ),
            id="R-REG-03-meta-not-callable",
        ),
    ],
)
def test_r_reg_02_r_reg_03_r_reg_04_invalid_output_shape_is_a_type_error(output: object) -> None:
    reg = ToolRegistry()
    with pytest.raises(TypeError, match=output_message("t")):
        reg.register(with_output("t", output))
    assert reg.get("t") is None


def test_r_reg_03_callable_presentation_meta_is_accepted() -> None:
    reg = ToolRegistry()
    out = ToolOutput(schema={"type": "string"}, render=render, presentation_meta=lambda a, v: 1)
    reg.register(with_output("t", out))
    assert reg.get("t") is not None


# ---------------------------------------------------------------- R-REG-05
def test_r_reg_05_unsupported_output_schema_is_a_json_schema_error() -> None:
    reg = ToolRegistry()
    bad = ToolOutput(schema={"type": "tuple"}, render=render)
    with pytest.raises(JsonSchemaError) as info:
        reg.register(with_output("t", bad))
    assert info.value.code == "UNSUPPORTED_SCHEMA"
    assert info.value.message == (
        "unsupported JSON schema: schema.type must be one of "
        "object/array/string/number/integer/boolean/null"
    )
    assert reg.get("t") is None


def test_r_reg_05_missing_output_schema_is_not_a_schema_object() -> None:
    reg = ToolRegistry()
    with pytest.raises(JsonSchemaError) as info:
        reg.register(with_output("t", ToolOutput(schema=None, render=render)))  # type: ignore[arg-type]
    assert info.value.violations == ("schema must be a schema object",)


# ---------------------------------------------------------------- R-REG-06
@pytest.mark.parametrize(
    "timeout", [0, -5, math.inf, math.nan, "5", -0.0], ids=lambda v: f"R-REG-06-{v!r}"
)
def test_r_reg_06_timeout_must_be_positive_finite(timeout: object) -> None:
    reg = ToolRegistry()
    with pytest.raises(TypeError, match=timeout_message("t")):
        reg.register(make_tool("t", timeout_ms=timeout))
    assert reg.get("t") is None


@pytest.mark.parametrize("timeout", [None, 0.5, 1, 30_000], ids=lambda v: f"R-REG-06-ok-{v!r}")
def test_r_reg_06_absent_or_fractional_timeout_is_accepted(timeout: float | None) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t", timeout_ms=timeout))
    definition = reg.get("t")
    assert definition is not None
    assert definition.timeout_ms == timeout


# ---------------------------------------------------------------- R-REG-07
@pytest.mark.parametrize("mode", ["native", "code", "both"])
def test_r_reg_07_run_code_is_reserved_globally_in_every_mode(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    with pytest.raises(ValueError, match=re.escape(RESERVED_MESSAGE)):
        reg.register(make_tool(RESERVED_TOOL_NAME))
    assert reg.definitions() == []


@pytest.mark.parametrize("mode", ["native", "code", "both"])
def test_r_reg_07_run_code_is_reserved_for_scoped_registration(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    with pytest.raises(ValueError, match=re.escape(RESERVED_MESSAGE)):
        reg.scope("agent").register(make_tool(RESERVED_TOOL_NAME))
    assert reg.definitions("agent") == []


# ---------------------------------------------------------------- R-REG-08
def test_r_reg_08_timeout_is_checked_before_the_reserved_name() -> None:
    reg = ToolRegistry()
    with pytest.raises(TypeError, match=timeout_message(RESERVED_TOOL_NAME)):
        reg.register(make_tool(RESERVED_TOOL_NAME, timeout_ms=0))


def test_r_reg_08_output_is_checked_before_the_reserved_name() -> None:
    reg = ToolRegistry()
    with pytest.raises(TypeError, match=output_message(RESERVED_TOOL_NAME)):
        reg.register(with_output(RESERVED_TOOL_NAME, None))


def test_r_reg_08_output_schema_is_checked_before_the_timeout() -> None:
    reg = ToolRegistry()
    bad = ToolOutput(schema={"type": "tuple"}, render=render)
    with pytest.raises(JsonSchemaError):
        reg.register(with_output("t", bad, timeout_ms=0))


def test_r_reg_08_timeout_is_checked_before_the_duplicate_name() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t"))
    with pytest.raises(TypeError, match=timeout_message("t")):
        reg.register(make_tool("t", timeout_ms=-1))


# ---------------------------------------------------------------- R-REG-09 / R-REG-10
def test_r_reg_09_global_duplicate_names_the_per_agent_alternative() -> None:
    reg = ToolRegistry()
    first = make_tool("t", value="first")
    reg.register(first)
    with pytest.raises(ValueError) as info:
        reg.register(make_tool("t", value="second"))
    assert str(info.value).startswith(
        'tool "t" is already registered (for a per-agent variant, register through that agent\'s'
    )
    assert reg.get("t") is first


def test_r_reg_10_scoped_duplicate_is_rejected_within_one_layer() -> None:
    reg = ToolRegistry()
    scoped = reg.scope("agent")
    first = make_tool("t", value="first")
    scoped.register(first)
    with pytest.raises(ValueError, match=re.escape('tool "t" is already registered in this scope')):
        scoped.register(make_tool("t", value="second"))
    assert reg.get("t", "agent") is first


# ---------------------------------------------------------------- R-REG-11
@pytest.mark.parametrize("global_first", [True, False], ids=["R-REG-11-global-first", "scoped"])
async def test_r_reg_11_same_name_in_different_layers_is_a_shadow(global_first: bool) -> None:
    reg = ToolRegistry()
    glob, scoped = make_tool("t", value="global"), make_tool("t", value="scoped")
    if global_first:
        reg.register(glob)
        reg.scope("agent").register(scoped)
    else:
        reg.scope("agent").register(scoped)
        reg.register(glob)
    assert reg.get("t") is glob
    assert reg.get("t", "agent") is scoped
    assert text_of(await run(reg, "t", scope="agent")) == "scoped"


def test_r_reg_11_ancestor_and_descendant_may_share_a_name() -> None:
    reg = ToolRegistry()
    parent_def, child_def = make_tool("t", value="p"), make_tool("t", value="c")
    reg.scope("parent").register(parent_def)
    reg.scope("child", parent="parent").register(child_def)
    assert reg.get("t", "parent") is parent_def
    assert reg.get("t", "child") is child_def


# ---------------------------------------------------------------- R-REG-12
def test_r_reg_12_names_are_exact_strings_and_otherwise_unchecked() -> None:
    reg = ToolRegistry()
    for name in ("Echo", "echo", "", "__proto__", "with space"):
        reg.register(make_tool(name))
    assert names(reg) == ["Echo", "echo", "", "__proto__", "with space"]
    assert reg.get("ECHO") is None


async def test_r_reg_12_proto_is_an_ordinary_executable_name() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("__proto__", value="own binding"))
    assert text_of(await run(reg, "__proto__")) == "own binding"


# ---------------------------------------------------------------- R-REG-13
@pytest.mark.parametrize(
    "parameters",
    [
        pytest.param({"type": "object", "properties": {"x": {"pattern": "^a"}}}, id="pattern"),
        pytest.param({"anyOf": [{"type": "string"}, {"type": "null"}]}, id="anyOf"),
        pytest.param(None, id="none"),
    ],
)
def test_r_reg_13_register_does_not_check_parameters(parameters: object) -> None:
    reg = ToolRegistry()
    definition = ToolDefinition(
        name="t",
        description=None,
        parameters=parameters,  # type: ignore[arg-type]
        output=ToolOutput(schema={"type": "string"}, render=render),
        execute="not even callable",  # type: ignore[arg-type]
        is_concurrency_safe="nor this",  # type: ignore[arg-type]
    )
    reg.register(definition)
    assert reg.get("t") is definition


# ---------------------------------------------------------------- R-REG-14
def test_r_reg_14_definitions_are_kept_by_reference() -> None:
    reg = ToolRegistry()
    definition = make_tool("t")
    reg.register(definition)
    assert reg.get("t") is definition
    assert reg.definitions()[0] is definition


# ---------------------------------------------------------------- R-REG-15
def test_r_reg_15_disposer_removes_exactly_one_registration_idempotently() -> None:
    reg = ToolRegistry()
    events: list[int] = []
    reg.on_change(lambda: events.append(1))
    d_global = reg.register(make_tool("t", value="g"))
    scoped = make_tool("t", value="s")
    reg.scope("agent").register(scoped)
    reg.register(make_tool("other"))
    events.clear()
    d_global()
    assert names(reg) == ["other"]
    assert reg.get("t", "agent") is scoped
    assert len(events) == 1
    d_global()
    assert len(events) == 1
    assert d_global.disposed


def test_r_reg_15_a_disposed_name_can_be_registered_again() -> None:
    reg = ToolRegistry()
    with reg.register(make_tool("t", value="old")):
        pass
    fresh = make_tool("t", value="new")
    reg.register(fresh)
    assert reg.get("t") is fresh


# ---------------------------------------------------------------- R-REG-16
async def test_r_reg_16_disposing_a_scope_unwinds_everything_without_residue() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("a"))
    reg.register(make_tool("b"))
    before = reg.schemas("agent")
    scoped = reg.scope("agent")
    scoped.register(make_tool("local"))
    scoped.register(make_tool("a", value="shadow"))
    scoped.restrict(deny=["b"])
    scoped.present_as("both")
    scoped.guard(lambda execution: "denied by scope guard")
    assert names(reg, "agent") == ["a", "local", RESERVED_TOOL_NAME]
    scoped.dispose()
    assert reg.schemas("agent") == before
    result = await run(reg, "b", scope="agent")
    assert text_of(result) == "b"
    assert scoped.disposed


def test_r_reg_16_a_disposed_scope_handle_refuses_new_contributions() -> None:
    reg = ToolRegistry()
    scoped = reg.scope("agent")
    scoped.dispose()
    with pytest.raises((RuntimeError, ValueError)):
        scoped.register(make_tool("late"))
    assert names(reg, "agent") == []


# ---------------------------------------------------------------- R-REG-17
def test_r_reg_17_scope_teardown_runs_in_reverse_order() -> None:
    reg = ToolRegistry()
    scoped = reg.scope("agent")
    for name in ("a", "b", "c"):
        scoped.register(make_tool(name))
    seen: list[list[str]] = []
    reg.on_change(lambda: seen.append(names(reg, "agent")))
    scoped.dispose()
    assert seen == [["a", "b"], ["a"], []]


def test_r_reg_17_the_returned_disposer_is_the_one_the_scope_runs() -> None:
    reg = ToolRegistry()
    scoped = reg.scope("agent")
    scoped.register(make_tool("a"))
    d_b = scoped.register(make_tool("b"))
    events: list[int] = []
    reg.on_change(lambda: events.append(1))
    d_b()
    scoped.dispose()
    assert len(events) == 2  # b once (by hand), then a; b's disposer did not run twice
    assert names(reg, "agent") == []


# ---------------------------------------------------------------- R-REG-18
def test_r_reg_18_reads_and_failed_first_contributions_leave_no_trace() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("g"))
    events: list[int] = []
    reg.on_change(lambda: events.append(1))
    assert names(reg, "ghost") == ["g"]
    assert reg.get("g", "ghost") is not None
    scoped = reg.scope("fresh")
    with pytest.raises(ValueError):
        scoped.restrict(allow=["missing"])
    with pytest.raises(ValueError):
        scoped.register(make_tool(RESERVED_TOOL_NAME))
    assert names(reg, "fresh") == ["g"]
    assert events == []
    scoped.register(make_tool("late"))
    assert names(reg, "fresh") == ["g", "late"]


# ---------------------------------------------------------------- R-REG-23 / R-REG-24
def test_r_reg_23_default_mode_is_native() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t"))
    assert names(reg) == ["t"]
    assert reg.get(RESERVED_TOOL_NAME) is None


def test_r_reg_23_batch_cap_defaults_to_ten() -> None:
    parameter = inspect.signature(BatchExecutor).parameters["max_parallel_tool_calls"]
    assert parameter.default == 10


@pytest.mark.parametrize("cap", [0, -1, 1.5, True], ids=lambda v: f"R-REG-23-{v!r}")
def test_r_reg_23_batch_cap_must_be_a_positive_integer(cap: object) -> None:
    with pytest.raises(ValueError, match="must be a positive integer"):
        BatchExecutor(ToolRegistry(), max_parallel_tool_calls=cap)  # type: ignore[arg-type]


def test_r_reg_24_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError):
        ToolRegistry(mode="turbo")
    for mode in ("native", "code", "both"):
        ToolRegistry(mode=mode)


# ---------------------------------------------------------------- scopes
def test_scope_is_created_on_first_use_and_returned_again() -> None:
    reg = ToolRegistry()
    child = reg.scope("child", parent="preset")
    assert isinstance(child, ScopedTools)
    assert reg.scope("child", parent="preset") is child
    assert (child.key, child.parent) == ("child", "preset")
    preset = reg.scope("preset")
    assert (preset.key, preset.parent) == ("preset", None)
    assert reg.scope("preset") is preset


def test_scope_parent_is_created_with_the_child_and_inherited() -> None:
    reg = ToolRegistry()
    reg.scope("child", parent="preset")
    reg.scope("preset").register(make_tool("from_preset"))
    assert names(reg, "child") == ["from_preset"]


def test_scope_with_a_different_parent_raises() -> None:
    reg = ToolRegistry()
    reg.scope("child", parent="p1")
    reg.scope("p2")
    with pytest.raises(ValueError):
        reg.scope("child", parent="p2")
    assert reg.scope("child", parent="p1").parent == "p1"


@pytest.mark.parametrize(
    ("setup", "key", "parent"),
    [
        pytest.param([], "a", "a", id="self"),
        pytest.param([("b", "a")], "a", "b", id="two"),
        pytest.param([("b", "a"), ("c", "b")], "a", "c", id="three"),
    ],
)
def test_scope_cycles_raise(setup: list[tuple[str, str]], key: str, parent: str) -> None:
    reg = ToolRegistry()
    for child, its_parent in setup:
        reg.scope(child, parent=its_parent)
    with pytest.raises(ValueError):
        reg.scope(key, parent=parent)
    reg.scope("c0").register(make_tool("x"))
    assert names(reg, "c0") == ["x"]


def test_r_reg_18_an_emptied_scope_layer_is_reclaimed_and_reads_create_none() -> None:
    from toolray import ToolRegistry as Registry

    reg = Registry()
    base = reg.stats().layers
    reg.schemas("ghost")
    reg.executable("x", "ghost")
    assert reg.stats().layers == base  # reads never create layers
    scope = reg.scope("agent")
    dispose = scope.register(_echo_for_stats())
    assert reg.stats().layers == base + 1
    assert reg.stats().tools == 1
    dispose()
    assert reg.stats().layers == base  # all four tables empty: reclaimed
    scope.register(_echo_for_stats())
    with pytest.raises(ValueError, match="already registered in this scope"):
        scope.register(_echo_for_stats())
    assert reg.stats().tools == 1


def _echo_for_stats() -> object:
    from toolray import ToolOutput, define_tool, text_block

    return define_tool(
        name="stats_echo",
        description=None,
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=lambda args, ctx: "x",
    )
