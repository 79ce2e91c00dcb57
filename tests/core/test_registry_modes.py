"""R-COND (presentation mode, the ``run_code`` transport, the collapse) and R-MODE
(``execution_mode`` classification).

Python decisions: ``execution_mode`` returns the strings ``"parallel"`` / ``"exclusive"``
(R-MODE-01), so R-MODE-01's "fresh object" becomes "one of the two strings". Misuse messages
use the Python spelling ``present_as()``. Nested calls carry a ``parent`` token
taken from a real execution (here: the ``run_code`` call's own token, seen by a pre-execute
hook), as a Code Mode program's sub-calls would.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from toolray import (
    RESERVED_TOOL_NAME,
    AbortController,
    ExecutionToken,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)

from ._registry_helpers import code_of, make_tool, mode_input, names, run, text_of

CONFLICT = (
    'present_as("{new}") conflicts with "{old}" already declared for this scope; one '
    "composition selects one presentation"
)


def collapse_message(name: str) -> str:
    return (
        f'unknown tool "{name}": only `run_code` is callable directly — call `{name}` from '
        "inside a `run_code` program instead"
    )


async def run_code_token(reg: ToolRegistry, scope: str | None) -> ExecutionToken:
    """The token of a model-direct ``run_code`` call in ``scope`` (a sub-call's parent)."""
    tokens: list[ExecutionToken] = []

    async def capture(execution: Any, next: Any) -> Any:
        if execution.name == RESERVED_TOOL_NAME:
            tokens.append(execution.token)
        return await next()

    with reg.on_pre_execute(capture):
        await run(reg, RESERVED_TOOL_NAME, scope=scope, arguments={"description": "d", "code": ""})
    assert len(tokens) == 1
    return tokens[0]


def safe_tool(name: str = "safe", value: str | None = None) -> Any:
    return make_tool(name, value=value, is_concurrency_safe=lambda args: True)


# ---------------------------------------------------------------- R-COND-01
def test_r_cond_01_every_restriction_of_every_chain_layer_must_admit() -> None:
    reg = ToolRegistry()
    for name in ("a", "b", "c", "d"):
        reg.register(make_tool(name))
    reg.scope("root").restrict(allow=["a", "b", "c"])
    reg.scope("mid", parent="root").restrict(deny=["c"])
    leaf = reg.scope("leaf", parent="mid")
    leaf.restrict(allow=["a", "b", "d"])
    leaf.restrict(deny=["b"])
    assert names(reg, "root") == ["a", "b", "c"]
    assert names(reg, "mid") == ["a", "b"]
    assert names(reg, "leaf") == ["a"]


# ---------------------------------------------------------------- R-COND-02..08
def test_r_cond_02_nearest_present_as_on_the_chain_else_deployment() -> None:
    reg = ToolRegistry(mode="native")
    reg.scope("preset").present_as("code")
    reg.scope("agent", parent="preset")
    reg.scope("sub", parent="agent")
    assert names(reg, "sub") == [RESERVED_TOOL_NAME]
    assert names(reg, "other") == []
    coded = ToolRegistry(mode="code")
    assert names(coded, "anyone") == [RESERVED_TOOL_NAME]


def test_r_cond_03_a_child_declaration_overrides_its_parent() -> None:
    reg = ToolRegistry(mode="code")
    reg.scope("parent").present_as("native")
    child = reg.scope("child", parent="parent")
    assert names(reg, "child") == []
    child.present_as("code")
    assert names(reg, "child") == [RESERVED_TOOL_NAME]
    assert names(reg, "parent") == []


def test_r_cond_04_global_present_as_is_refused() -> None:
    reg = ToolRegistry()
    with pytest.raises(ValueError, match=re.escape("present_as() requires a scoped context")):
        reg.present_as("code")
    assert reg.get(RESERVED_TOOL_NAME) is None


def test_r_cond_05_one_declaration_per_scope_until_disposed() -> None:
    reg = ToolRegistry()
    scoped = reg.scope("agent")
    dispose = scoped.present_as("both")
    with pytest.raises(ValueError, match=re.escape(CONFLICT.format(new="code", old="both"))):
        scoped.present_as("code")
    dispose()
    scoped.present_as("code")
    assert names(reg, "agent") == [RESERVED_TOOL_NAME]


def test_r_cond_06_disposing_present_as_restores_the_inherited_mode() -> None:
    reg = ToolRegistry(mode="code")
    reg.scope("parent").present_as("both")
    dispose = reg.scope("child", parent="parent").present_as("native")
    assert names(reg, "child") == []
    dispose()
    assert names(reg, "child") == [RESERVED_TOOL_NAME]
    solo = reg.scope("solo").present_as("native")
    solo()
    assert names(reg, "solo") == [RESERVED_TOOL_NAME]


@pytest.mark.parametrize("mode", ["code", "both"])
def test_r_cond_07_run_code_is_last_unfiltered_and_shared(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    reg.register(make_tool("a"))
    reg.scope("agent").register(make_tool("own"))
    reg.scope("agent").restrict(allow=[])
    assert names(reg) == ["a", RESERVED_TOOL_NAME]
    assert names(reg, "agent") == ["own", RESERVED_TOOL_NAME]
    transport = reg.get(RESERVED_TOOL_NAME)
    assert transport is not None
    assert reg.get(RESERVED_TOOL_NAME, "agent") is transport
    assert reg.get(RESERVED_TOOL_NAME, "elsewhere") is transport


def test_r_cond_07_native_has_no_run_code() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("a"))
    assert reg.get(RESERVED_TOOL_NAME) is None
    assert reg.executable(RESERVED_TOOL_NAME) is None
    assert names(reg, "agent") == ["a"]


def test_r_cond_08_opt_out_and_opt_in() -> None:
    coded = ToolRegistry(mode="code")
    coded.scope("native-agent").present_as("native")
    assert RESERVED_TOOL_NAME not in names(coded, "native-agent")
    native = ToolRegistry(mode="native")
    native.scope("coder").present_as("code")
    native.scope("hybrid").present_as("both")
    assert RESERVED_TOOL_NAME in names(native, "coder")
    assert RESERVED_TOOL_NAME in names(native, "hybrid")
    assert RESERVED_TOOL_NAME not in names(native)
    assert native.get(RESERVED_TOOL_NAME) is None


# ---------------------------------------------------------------- R-COND-09..14
async def test_r_cond_09_model_direct_call_under_code_is_refused() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo"))
    reg.scope("coder").present_as("code")
    result = await run(reg, "echo", scope="coder")
    assert code_of(result) == "UNKNOWN_TOOL"


async def test_r_cond_09_both_never_collapses() -> None:
    reg = ToolRegistry(mode="both")
    reg.register(make_tool("echo"))
    assert text_of(await run(reg, "echo", scope="agent")) == "echo"
    assert text_of(await run(reg, "echo")) == "echo"


async def test_r_cond_09_nested_calls_never_collapse() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("echo"))
    reg.scope("coder").present_as("code")
    parent = await run_code_token(reg, "coder")
    result = await run(reg, "echo", scope="coder", parent=parent)
    assert not result.is_error
    assert text_of(result) == "echo"


async def test_r_cond_09_run_code_itself_is_not_collapsed() -> None:
    reg = ToolRegistry(mode="code")
    result = await run(reg, RESERVED_TOOL_NAME, arguments={"description": "d", "code": "1"})
    assert code_of(result) != "UNKNOWN_TOOL"


def test_r_cond_10_collapse_does_not_affect_get_or_schemas() -> None:
    reg = ToolRegistry(mode="code")
    echo = make_tool("echo")
    reg.register(echo)
    assert reg.get("echo") is echo
    assert names(reg) == ["echo", RESERVED_TOOL_NAME]
    assert reg.definitions() == [echo]


async def test_r_cond_11_collapse_is_decided_before_policy_and_body() -> None:
    reg = ToolRegistry(mode="code")
    calls: list[str] = []

    async def body(args: Any, ctx: Any) -> str:
        calls.append("body")
        return "ran"

    async def pre(execution: Any, next: Any) -> Any:
        calls.append("pre")
        return await next()

    reg.register(make_tool("echo", execute=body))
    reg.on_pre_execute(pre)
    reg.guard(lambda execution: calls.append("guard"))  # type: ignore[func-returns-value]
    result = await run(reg, "echo", scope="agent")
    assert result.is_error
    assert result.error.message == collapse_message("echo")  # type: ignore[union-attr]
    assert text_of(result) == f"Error: {collapse_message('echo')}"
    info = result.error.info  # type: ignore[union-attr]
    assert info is not None
    assert (info.name, info.code) == ("ToolNotFoundError", "UNKNOWN_TOOL")
    assert calls == []


async def test_r_cond_12_an_invisible_name_under_code_gets_the_plain_message() -> None:
    reg = ToolRegistry(mode="code")
    reg.register(make_tool("echo"))
    reg.scope("agent").restrict(deny=["echo"])
    for name, scope in (("nope", None), ("echo", "agent")):
        result = await run(reg, name, scope=scope)
        assert text_of(result) == f'Error: unknown tool "{name}"'
        assert code_of(result) == "UNKNOWN_TOOL"


async def test_r_cond_13_a_pre_aborted_collapsed_call_is_aborted_before_dispatch() -> None:
    reg = ToolRegistry(mode="code")
    reg.register(make_tool("echo"))
    ctrl = AbortController()
    ctrl.abort()
    result = await run(reg, "echo", sig=ctrl.signal)
    assert code_of(result) == "ABORTED_BEFORE_DISPATCH"
    assert text_of(result) == "Error: tool call aborted before dispatch"


async def test_r_cond_14_collapse_uses_the_per_scope_effective_mode() -> None:
    reg = ToolRegistry(mode="native")
    reg.register(make_tool("echo"))
    reg.scope("preset").present_as("code")
    reg.scope("agent", parent="preset")
    collapsed = await run(reg, "echo", scope="agent")
    assert collapsed.error.message == collapse_message("echo")  # type: ignore[union-attr]
    assert text_of(await run(reg, "echo")) == "echo"
    assert text_of(await run(reg, "echo", scope="unrelated")) == "echo"


# ---------------------------------------------------------------- R-MODE
def test_r_mode_01_r_mode_02_only_an_exact_true_is_parallel() -> None:
    reg = ToolRegistry()
    reg.register(safe_tool())
    reg.register(make_tool("unsafe", is_concurrency_safe=lambda args: False))
    assert reg.execution_mode(mode_input("safe")) == "parallel"
    assert reg.execution_mode(mode_input("unsafe")) == "exclusive"


def test_r_mode_03_no_classifier_is_exclusive() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("plain"))
    assert reg.execution_mode(mode_input("plain")) == "exclusive"


def test_r_mode_04_unknown_tool_is_exclusive() -> None:
    assert ToolRegistry().execution_mode(mode_input("ghost")) == "exclusive"


def test_r_mode_05_the_classifier_sees_the_arguments() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("fs", is_concurrency_safe=lambda args: args.get("mode") == "read"))
    assert reg.execution_mode(mode_input("fs", {"mode": "read"})) == "parallel"
    assert reg.execution_mode(mode_input("fs", {"mode": "write"})) == "exclusive"


def test_r_mode_06_define_tool_invalid_arguments_never_reach_the_classifier() -> None:
    seen: list[Any] = []

    def classify(args: Any) -> bool:
        seen.append(args)
        return True

    reg = ToolRegistry()
    reg.register(
        define_tool(
            name="read",
            description=None,
            parameters={"path": {"type": "string", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
            execute=lambda args, ctx: args["path"],
            is_concurrency_safe=classify,
        )
    )
    assert reg.execution_mode(mode_input("read", {})) == "exclusive"
    assert reg.execution_mode(mode_input("read", {"path": 3})) == "exclusive"
    assert seen == []
    assert reg.execution_mode(mode_input("read", {"path": "a"})) == "parallel"
    assert seen == [{"path": "a"}]


def test_r_mode_07_a_throwing_classifier_is_exclusive() -> None:
    def boom(args: Any) -> bool:
        raise RuntimeError("classifier exploded")

    reg = ToolRegistry()
    reg.register(make_tool("t", is_concurrency_safe=boom))
    assert reg.execution_mode(mode_input("t")) == "exclusive"


@pytest.mark.parametrize("verdict", ["yes", 1, 1.0, [True], None], ids=repr)
def test_r_mode_08_truthy_non_true_is_exclusive(verdict: Any) -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t", is_concurrency_safe=lambda args: verdict))
    assert reg.execution_mode(mode_input("t")) == "exclusive"


def test_r_mode_09_a_raw_classifier_gets_the_arguments_as_passed() -> None:
    seen: list[Any] = []
    reg = ToolRegistry()
    reg.register(make_tool("t", is_concurrency_safe=lambda args: seen.append(args) or True))
    arguments = {"nested": {"k": [1, 2]}}
    assert reg.execution_mode(mode_input("t", arguments)) == "parallel"
    assert seen[0] is arguments
    seen[0]["nested"]["k"].append(3)  # not frozen
    assert arguments["nested"]["k"] == [1, 2, 3]


def test_r_mode_10_the_callers_view_decides() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("t"))
    reg.scope("shadowing").register(safe_tool("t"))
    reg.register(safe_tool("hidden"))
    reg.scope("masking").restrict(deny=["hidden"])
    assert reg.execution_mode(mode_input("t")) == "exclusive"
    assert reg.execution_mode(mode_input("t", scope="shadowing")) == "parallel"
    assert reg.execution_mode(mode_input("hidden")) == "parallel"
    assert reg.execution_mode(mode_input("hidden", scope="masking")) == "exclusive"


async def test_r_mode_11_collapse_makes_model_direct_calls_exclusive() -> None:
    reg = ToolRegistry()
    reg.register(safe_tool())
    reg.scope("coder").present_as("code")
    parent = await run_code_token(reg, "coder")
    assert reg.execution_mode(mode_input("safe", scope="coder")) == "exclusive"
    assert reg.execution_mode(mode_input("safe", scope="coder", parent=parent)) == "parallel"


@pytest.mark.parametrize("mode", ["code", "both"])
def test_r_mode_12_run_code_is_exclusive(mode: str) -> None:
    reg = ToolRegistry(mode=mode)
    assert reg.execution_mode(mode_input(RESERVED_TOOL_NAME)) == "exclusive"


def test_r_mode_13_classification_reflects_the_registry_now() -> None:
    reg = ToolRegistry()
    assert reg.execution_mode(mode_input("t")) == "exclusive"
    dispose = reg.register(safe_tool("t"))
    assert reg.execution_mode(mode_input("t")) == "parallel"
    dispose()
    assert reg.execution_mode(mode_input("t")) == "exclusive"
    reg.register(make_tool("t"))
    assert reg.execution_mode(mode_input("t")) == "exclusive"
