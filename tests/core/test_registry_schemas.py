"""R-SCH (schema projection, ``get``, ``definitions``) and R-PRES (presentation cards).

Not built: Code Mode runtime / invariant companion. These entries (or parts) describe the
Code Mode prompt and program runtime, which this package does not implement:

- R-SCH-11 (``code``/``both`` parts): the wire contribution of a Code Mode executor
  (``knownNames`` collapsing to ``run_code``). The native part is tested through the
  ``ToolExecutor.describe`` seam of the seed surface.
- R-SCH-12: ``toolOrder`` validation during system-prompt assembly.
- R-SCH-13: "mode requires a code runtime" / "no SDK renderer" assembly errors.
- R-SCH-14 (SDK rendering part): the program SDK projection with detached ``output``
  schemas. What toolray requires is tested: ``definitions()`` never lists ``run_code``.
- R-SCH-15: the ``tools:code-only`` / ``tools:sdk`` prompt sections.
- R-SCH-17: the language-dependent ``run_code`` schema flavours.

R-SCH-05: upstream's ``parameters: undefined`` has no analog (``None`` is JSON ``null``, which
is lossless); NaN and a tuple stand in for non-lossless parameters.

R-PRES is a vocabulary with no runtime behaviour; it is checked as types (each card exists
as a frozen dataclass with its ``card`` discriminator, and ``shape``/``kind`` where the
original has a second one), plus the two behaviours that touch the registry: presenters
never reach ``schemas()`` (R-PRES-14) and the registry never calls them (R-PRES-12).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from typing import Any

import pytest

import toolray
from toolray import (
    RESERVED_TOOL_NAME,
    BatchExecutor,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray.presentation import GenericCallView, ToolResult

from ._registry_helpers import make_tool, names, run, text_of

SCHEMA_KEYS = {"name", "description", "parameters"}


def nested_one_of(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        node = {"oneOf": [node, {"type": "null"}]}
    return node


def one_of_depth(node: Any) -> int:
    depth = 0
    while isinstance(node, dict) and "oneOf" in node:
        node = node["oneOf"][0]
        depth += 1
    return depth


def full_tool(name: str = "full") -> Any:
    return make_tool(
        name,
        timeout_ms=1000,
        is_concurrency_safe=lambda args: True,
        present_call=lambda args: GenericCallView(title="t"),
        present_result=lambda args, result: None,
        project_content=lambda execution, result: None,
        finalize_content=lambda execution, result: None,
    )


# ---------------------------------------------------------------- R-SCH-01..03
def test_r_sch_01_r_sch_02_schemas_are_allowlisted_and_in_view_order() -> None:
    reg = ToolRegistry()
    reg.register(full_tool("b"))
    reg.register(full_tool("a"))
    reg.scope("agent").register(full_tool("c"))
    schemas = reg.schemas("agent")
    assert [s["name"] for s in schemas] == ["b", "a", "c"]
    for schema in schemas:
        assert set(schema) == SCHEMA_KEYS
        assert schema["description"] == "a test tool"
        assert schema["parameters"] == {"type": "object", "properties": {}}


def test_r_sch_03_schemas_are_deep_detached_copies() -> None:
    reg = ToolRegistry()
    parameters = {"type": "object", "properties": {"x": {"type": "string", "enum": ["a"]}}}
    definition = make_tool("t", parameters=parameters)
    reg.register(definition)
    first = reg.schemas()[0]
    assert first["parameters"] is not parameters
    first["parameters"]["properties"]["x"]["enum"].append("mutated")
    first["parameters"]["extra"] = True
    first["description"] = "mutated"
    second = reg.schemas()[0]
    assert second == {"name": "t", "description": "a test tool", "parameters": parameters}
    assert parameters["properties"]["x"]["enum"] == ["a"]
    assert definition.parameters is parameters


def test_r_sch_04_five_thousand_nested_one_of_levels_project() -> None:
    reg = ToolRegistry()
    parameters = {"type": "object", "properties": {"deep": nested_one_of(5000)}}
    reg.register(make_tool("deep", parameters=parameters))
    projected = reg.schemas()[0]["parameters"]
    assert one_of_depth(projected["properties"]["deep"]) == 5000


@pytest.mark.parametrize(
    "parameters",
    [
        pytest.param({"type": "object", "properties": {"n": {"default": math.nan}}}, id="nan"),
        pytest.param({"type": "object", "enum": (1, 2)}, id="tuple"),
    ],
)
def test_r_sch_05_non_lossless_parameters_register_but_fail_projection(parameters: Any) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("fine"))
    reg.register(make_tool("bad", parameters=parameters))
    assert reg.get("bad") is not None
    with pytest.raises(ValueError) as info:
        reg.schemas()
    assert str(info.value) == (
        'tool "bad" parameters must be lossless JSON before schema projection'
    )


def test_r_sch_06_raw_parameters_pass_through_verbatim() -> None:
    reg = ToolRegistry()
    parameters = {
        "type": "object",
        "properties": {"x": {"type": "string", "pattern": "^a", "format": "uri"}},
        "anyOf": [{"required": ["x"]}],
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    reg.register(make_tool("mcp", parameters=parameters))
    assert reg.schemas()[0]["parameters"] == parameters


def test_r_sch_07_define_tool_parameters_project_as_the_compiled_object() -> None:
    reg = ToolRegistry()
    reg.register(
        define_tool(
            name="read",
            description="Read a file",
            parameters={
                "path": {"type": "string", "required": True},
                "limit": {"type": "integer"},
            },
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=lambda args, ctx: "",
        )
    )
    parameters = reg.schemas()[0]["parameters"]
    assert parameters == {
        "type": "object",
        "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["path"],
    }
    assert "additionalProperties" not in parameters


def test_r_sch_08_a_missing_description_projects_as_none() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t", description=None))
    schema = reg.schemas()[0]
    assert "description" in schema
    assert schema["description"] is None


# ---------------------------------------------------------------- R-SCH-09..11
@pytest.mark.parametrize(
    ("mode", "expected"),
    [("native", ["g"]), ("code", ["g", RESERVED_TOOL_NAME]), ("both", ["g", RESERVED_TOOL_NAME])],
)
def test_r_sch_09_the_global_view_has_global_tools_only(mode: str, expected: list[str]) -> None:
    reg = ToolRegistry(mode=mode)
    reg.register(make_tool("g"))
    reg.scope("agent").register(make_tool("s"))
    assert names(reg) == expected


@pytest.mark.parametrize("mode", ["code", "both"])
def test_r_sch_10_non_native_scopes_list_capabilities_then_run_code(mode: str) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("a"))
    reg.register(make_tool("b"))
    reg.scope("agent").register(make_tool("own"))
    reg.scope("agent").present_as(mode)
    assert names(reg, "agent") == ["a", "b", "own", RESERVED_TOOL_NAME]
    run_code = reg.schemas("agent")[-1]
    assert set(run_code) == SCHEMA_KEYS
    assert run_code["parameters"]["type"] == "object"


def test_r_sch_11_native_wire_contribution_is_every_visible_schema() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("a"))
    reg.register(make_tool("b"))
    reg.scope("agent").register(make_tool("own"))
    reg.scope("agent").restrict(deny=["b"])
    described = BatchExecutor(reg).describe(reg.definitions("agent"))
    assert described.schemas == reg.schemas("agent")
    assert described.known_names == ["a", "own"]


# ---------------------------------------------------------------- R-SCH-14 / R-SCH-16
@pytest.mark.parametrize("mode", ["native", "code", "both"])
def test_r_sch_14_definitions_never_list_run_code(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    a = make_tool("a")
    own = make_tool("own")
    reg.register(a)
    reg.scope("agent").register(own)
    assert reg.definitions() == [a]
    assert reg.definitions("agent") == [a, own]


def test_r_sch_16_get_returns_the_visible_definition_or_none() -> None:
    reg = ToolRegistry()
    glob, hidden = make_tool("g"), make_tool("h")
    reg.register(glob)
    reg.register(hidden)
    reg.scope("owner").register(make_tool("scoped"))
    reg.scope("masked").restrict(deny=["h"])
    assert reg.get("g") is glob
    assert reg.get("g", "owner") is glob
    assert reg.get("unknown") is None
    assert reg.get("h", "masked") is None
    assert reg.get("scoped") is None
    assert reg.get("scoped", "masked") is None


# ---------------------------------------------------------------- R-PRES
CALL_CARDS = {"generic": "GenericCallView", "terminal": "TerminalCallView", "diff": "DiffCallView"}
RESULT_CARDS = {
    "GenericResultView": ("generic", None),
    "TerminalResultView": ("terminal", None),
    "DiffResultView": ("diff", None),
    "SearchMatchesResultView": ("search", ("shape", "matches")),
    "SearchPathsResultView": ("search", ("shape", "paths")),
    "ReadResultView": ("read", None),
    "WebSearchResultView": ("web", ("kind", "search")),
    "WebFetchResultView": ("web", ("kind", "fetch")),
}


def discriminator(cls: type, field_name: str) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert field_name in fields, (cls, field_name)
    return fields[field_name].default


def assert_frozen_dataclass(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_r_pres_01_call_views_are_discriminated_by_card() -> None:
    members = set(typing.get_args(toolray.presentation.ToolCallView))
    assert {getattr(toolray.presentation, n) for n in CALL_CARDS.values()} == members
    for card, class_name in CALL_CARDS.items():
        cls = getattr(toolray.presentation, class_name)
        assert_frozen_dataclass(cls)
        assert discriminator(cls, "card") == card


def test_r_pres_02_r_pres_03_r_pres_04_r_pres_05_call_card_fields() -> None:
    generic = {f.name for f in dataclasses.fields(toolray.presentation.GenericCallView)}
    assert {"title", "kind", "raw_input", "content", "locations"} <= generic
    terminal = {f.name for f in dataclasses.fields(toolray.presentation.TerminalCallView)}
    assert {"title", "description", "cwd"} <= terminal
    diff = {f.name for f in dataclasses.fields(toolray.presentation.DiffCallView)}
    assert {"title", "diffs", "locations"} <= diff
    assert set(typing.get_args(toolray.presentation.ToolCallKind)) == {
        "read", "edit", "delete", "move", "search", "execute", "fetch", "other",
    }  # fmt: skip
    new_file = toolray.presentation.FileDiff(path="a.py", old_text=None, new_text="x")
    assert new_file.old_text is None
    assert toolray.presentation.FileLocation(path="a.py").line is None
    view = GenericCallView(title="Read a.py")
    assert view.card == "generic"
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.title = "changed"  # type: ignore[misc]


def test_r_pres_06_r_pres_07_r_pres_08_r_pres_09_r_pres_10_result_cards() -> None:
    members = set(typing.get_args(toolray.presentation.ToolResultView))
    assert {getattr(toolray.presentation, n) for n in RESULT_CARDS} == members
    for class_name, (card, second) in RESULT_CARDS.items():
        cls = getattr(toolray.presentation, class_name)
        assert_frozen_dataclass(cls)
        assert discriminator(cls, "card") == card, class_name
        if second is not None:
            assert discriminator(cls, second[0]) == second[1], class_name
    read = {f.name for f in dataclasses.fields(toolray.presentation.ReadResultView)}
    assert {"path", "offset", "lines", "total_lines", "lang", "content", "title"} <= read
    terminal = {f.name for f in dataclasses.fields(toolray.presentation.TerminalResultView)}
    assert {"output", "exit_code", "signal", "title"} <= terminal


def test_r_pres_11_tool_result_is_content_is_error_meta() -> None:
    result = ToolResult([text_block("x")], False)
    assert (result.content, result.is_error, result.meta) == ([text_block("x")], False, None)


def test_r_pres_13_define_tool_presenters_validate_softly() -> None:
    seen: list[Any] = []

    def present(args: Any) -> GenericCallView:
        seen.append(args)
        return GenericCallView(title=args["path"])

    definition = define_tool(
        name="read",
        description=None,
        parameters={"path": {"type": "string", "required": True}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=lambda args, ctx: "",
        present_call=present,
        present_result=lambda args, result: None,
    )
    assert definition.present_call is not None
    assert definition.present_call({}) is None
    assert seen == []
    assert definition.present_call({"path": "a.py"}) == GenericCallView(title="a.py")
    assert definition.present_result is not None
    assert definition.present_result({}, ToolResult([], False)) is None


async def test_r_pres_12_r_pres_14_presenters_are_never_called_nor_projected() -> None:
    def explode(*args: Any) -> Any:
        raise AssertionError("the registry must not call presenters")

    reg = ToolRegistry()
    reg.register(make_tool("t", present_call=explode, present_result=explode))
    assert set(reg.schemas()[0]) == SCHEMA_KEYS
    result = await run(reg, "t")
    assert text_of(result) == "t"
