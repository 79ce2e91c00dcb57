"""R-SCH-13/14/15/17: Code Mode's prompt sections, the SDK stubs and the run_code flavours."""

from __future__ import annotations

import re
from typing import Any

import pytest

from toolray import (
    RESERVED_TOOL_NAME,
    ToolDefinition,
    ToolOutput,
    ToolPromptSection,
    ToolRegistry,
    define_tool,
    text_block,
)

from ._code_helpers import FakeRuntime, code_registry, register_echo

CODE_ONLY = "`run_code` is the only tool you can call directly"


def sections(reg: ToolRegistry, scope: str | None = None) -> dict[str, ToolPromptSection]:
    return {s.id: s for s in reg.prompt_sections(scope)}


def stub_block(sdk: str, language: str = "python") -> str:
    found = re.search(rf"```{language}\n(.*)\n```", sdk, re.S)
    assert found is not None, sdk
    return found.group(1)


def search_tool() -> ToolDefinition:
    return define_tool(
        name="search",
        description="Search the web.",
        parameters={
            "query": {"type": "string", "required": True, "description": "What to look for."},
            "limit": {"type": "integer", "default": 10},
            "mode": {"type": "string", "enum": ["fast", "deep"]},
            "filters": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"site": {"type": "string", "required": True}},
            },
        },
        output=ToolOutput(
            schema={
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "hits": {
                        "type": "array",
                        "required": True,
                        "items": {
                            "type": "object",
                            "additionalProperties": True,
                            "properties": {"url": {"type": "string", "required": True}},
                        },
                    },
                    "next": {"oneOf": [{"type": "string"}, {"type": "null"}]},
                },
            },
            render=lambda a, v: [text_block("hits")],
        ),
        execute=lambda args, ctx: {"hits": []},
    )


# ---------------------------------------------------------------- R-SCH-15
def test_r_sch_15_native_deployments_contribute_no_sections_and_need_no_runtime() -> None:
    reg = ToolRegistry()
    register_echo(reg)
    assert reg.prompt_sections() == []
    assert reg.prompt_sections("agent") == []


def test_r_sch_15_code_states_the_rule_before_the_sdk() -> None:
    reg, _ = code_registry("code")
    register_echo(reg)
    found = reg.prompt_sections()
    assert [(s.id, s.order) for s in found] == [("tools:code-only", 99), ("tools:sdk", 150)]
    assert CODE_ONLY in found[0].text
    sdk = found[1].text
    assert "async def echo(value: str) -> str:" in sdk
    assert '"""Echo tool echo."""' in sdk
    assert RESERVED_TOOL_NAME + "(" not in sdk
    assert "top-level `await`" in sdk


def test_r_sch_15_both_omits_the_code_only_rule() -> None:
    reg, _ = code_registry("both")
    register_echo(reg)
    found = sections(reg)
    assert found["tools:code-only"].text == ""
    assert "async def echo(" in found["tools:sdk"].text


def test_r_sch_15_an_agent_can_opt_out_of_a_code_deployment() -> None:
    reg, _ = code_registry("code")
    register_echo(reg)
    reg.scope("agent").present_as("native")
    found = sections(reg, "agent")
    assert (found["tools:code-only"].text, found["tools:sdk"].text) == ("", "")


def test_r_sch_15_one_agent_presents_code_under_a_native_deployment() -> None:
    reg, _ = code_registry("native")
    register_echo(reg)
    reg.scope("preset").present_as("code")
    reg.scope("joined", parent="preset")
    assert CODE_ONLY in sections(reg, "joined")["tools:code-only"].text
    assert "async def echo(" in sections(reg, "preset")["tools:sdk"].text
    assert reg.prompt_sections() == []
    assert reg.prompt_sections("loner") == []


# ---------------------------------------------------------------- R-SCH-14
def test_r_sch_14_the_sdk_is_the_callers_visible_set_minus_run_code() -> None:
    reg, _ = code_registry("both")
    register_echo(reg, "kept")
    register_echo(reg, "hidden")
    reg.scope("agent").restrict(allow=["kept"])
    reg.scope("agent").register(search_tool())
    sdk = sections(reg, "agent")["tools:sdk"].text
    assert "async def kept(" in sdk
    assert "async def search(" in sdk
    assert "hidden" not in sdk
    assert "async def run_code" not in sdk


def test_r_sch_14_the_sdk_text_is_byte_identical_for_the_same_tools() -> None:
    reg, _ = code_registry("code")
    reg.register(search_tool())
    register_echo(reg)
    assert sections(reg)["tools:sdk"].text == sections(reg)["tools:sdk"].text


# ---------------------------------------------------------------- the Python stubs
def test_python_stubs_are_typed_and_valid_python() -> None:
    reg, _ = code_registry("code")
    reg.register(search_tool())
    block = stub_block(sections(reg)["tools:sdk"].text)
    assert (
        "async def search(query: str, limit: int = 10, "
        'mode: Literal["fast", "deep"] = ..., filters: SearchFilters = ...) -> SearchResult:'
    ) in block
    assert "class SearchFilters(TypedDict):\n    site: str" in block
    assert "class SearchResult(TypedDict):\n    hits: list[SearchResultHitsItem]" in block
    assert "    next: NotRequired[str | None]" in block
    assert "query: What to look for." in block
    namespace: dict[str, Any] = {}
    exec(compile(block, "<sdk>", "exec", dont_inherit=True), namespace)  # the stubs are real Python
    assert namespace["SearchFilters"].__required_keys__ == frozenset({"site"})
    assert namespace["SearchResult"].__optional_keys__ == frozenset({"next"})


def test_python_stubs_survive_hostile_names_and_descriptions() -> None:
    reg, _ = code_registry("code")
    reg.register(
        ToolDefinition(
            name="my-tool",
            description='Ends with a quote "',
            parameters={
                "type": "object",
                "properties": {"from": {"type": "string"}, "x": {"type": "number"}},
            },
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=lambda args, ctx: "ok",
        )
    )
    reg.register(
        ToolDefinition(
            name="doc",
            description='Has """ triple quotes and a \\ backslash',
            parameters={"type": "object", "properties": {}},
            output=ToolOutput(schema={}, render=lambda a, v: [text_block("x")]),
            execute=lambda args, ctx: "ok",
        )
    )
    block = stub_block(sections(reg)["tools:sdk"].text)
    namespace: dict[str, Any] = {}
    exec(compile(block, "<sdk>", "exec", dont_inherit=True), namespace)
    assert namespace["doc"].__doc__ == 'Has """ triple quotes and a \\ backslash'
    assert "getattr(tools, 'my-tool')" in block
    assert 'TypedDict("MyToolArgs", {"from": NotRequired[str], "x": NotRequired[float]})' in block


def test_deeply_nested_output_schemas_render_without_recursion() -> None:
    reg, _ = code_registry("code")
    output: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        output = {"oneOf": [output, {"type": "null"}]}
    reg.register(
        ToolDefinition(
            name="deep_output",
            description="Return a deeply nested union.",
            parameters={"type": "object", "properties": {}},
            output=ToolOutput(schema=output, render=lambda a, v: [text_block("x")]),
            execute=lambda args, ctx: "ok",
        )
    )
    assert "async def deep_output() -> str | None:" in sections(reg)["tools:sdk"].text


def test_typescript_stubs() -> None:
    reg, _ = code_registry("code", runtime=FakeRuntime("typescript"))
    reg.register(search_tool())
    block = stub_block(sections(reg)["tools:sdk"].text, "typescript")
    assert "declare const tools: {" in block
    assert "  /** Search the web. */" in block
    assert (
        '  search: (args: { query: string; limit?: number; mode?: "fast" | "deep"; '
        "filters?: { site: string } }) => Promise<{ hits: { url: string }[]; "
        "next?: string | null }>;"
    ) in block


# ---------------------------------------------------------------- R-SCH-13
@pytest.mark.parametrize("mode", ["code", "both"])
def test_r_sch_13_a_non_native_mode_without_runtime_fails_assembly(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    with pytest.raises(RuntimeError, match=f'^toolray: mode "{mode}" requires a code runtime — '):
        reg.prompt_sections()


def test_r_sch_13_the_missing_runtime_names_the_agents_own_mode() -> None:
    reg = ToolRegistry()
    reg.scope("agent").present_as("both")
    with pytest.raises(RuntimeError, match='mode "both" requires a code runtime'):
        reg.prompt_sections("agent")


def test_r_sch_13_a_language_without_renderer_fails_assembly() -> None:
    reg, _ = code_registry("code", runtime=FakeRuntime("ruby"))
    with pytest.raises(RuntimeError) as caught:
        reg.prompt_sections()
    assert str(caught.value) == (
        'toolray: no SDK renderer registered for runtime language "ruby" '
        '(known: "typescript", "python")'
    )


# ---------------------------------------------------------------- R-SCH-17
def test_r_sch_17_the_run_code_schema_speaks_python_for_a_python_runtime() -> None:
    reg, _ = code_registry("code")
    schema = reg.schemas()[-1]
    assert schema["name"] == RESERVED_TOOL_NAME
    assert "Execute a Python program" in schema["description"]
    assert "`description`" in schema["description"]
    assert "TypeScript" not in schema["description"]
    params = schema["parameters"]
    assert params["required"] == ["code", "description"]
    assert "Python" in params["properties"]["code"]["description"]


def test_r_sch_17_without_runtime_the_flavour_falls_back_to_typescript() -> None:
    definition = ToolRegistry(mode="code").get(RESERVED_TOOL_NAME)
    assert definition is not None
    assert "Execute a TypeScript program" in str(definition.description)
    code = definition.parameters["properties"]["code"]["description"]
    assert code == "The program: the body of an async TypeScript function."


def test_r_sch_17_an_unknown_language_fails_when_the_schema_is_read() -> None:
    reg, _ = code_registry("code", runtime=FakeRuntime("ruby"))
    definition = reg.get(RESERVED_TOOL_NAME)
    assert definition is not None
    message = (
        'toolray: no run_code schema flavor registered for runtime language "ruby" '
        '(known: "typescript", "python")'
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        _ = definition.description
    with pytest.raises(RuntimeError, match=re.escape(message)):
        reg.schemas()


def test_r_cond_07_every_scope_shares_the_registry_s_run_code_object() -> None:
    reg, _ = code_registry("code")
    assert reg.get(RESERVED_TOOL_NAME, "agent") is reg.get(RESERVED_TOOL_NAME)
    card = reg.get(RESERVED_TOOL_NAME).present_call(  # type: ignore[union-attr,misc]
        {"code": "1", "description": "Return one"}
    )
    assert (card.title, card.kind, card.raw_input) == ("Return one", "execute", "1")
