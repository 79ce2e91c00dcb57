"""Nested dispatch in-process: ``ctx.dispatch`` / ``ctx.dispatch_sync``.

A body calls other tools through the full pipeline of its own scope. The nested call has
``parent`` = the calling execution's token, the caller's ``root_call_id``, ``tool_set``,
scope and signal; its id defaults to ``<caller call id>:sub:<n>``. Nested calls bypass the
Code Mode collapse (R-COND-09) and carry no ``meta`` (P-BODY-12, R-PRES-11). The same
scenarios run on Ray in ``tests/contract/test_contract_nested.py``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from toolray import (
    AbortController,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolOutput,
    ToolRegistry,
    text_block,
)
from toolray.lowlevel import run_nested

from ._registry_helpers import activation, code_of, make_tool, run, signal, text_of


def _seen(store: list[Any]) -> Any:
    async def body(args: Any, ctx: Any) -> str:
        store.append(ctx)
        return f"inner:{ctx.call_id}"

    return body


def _outer(name: str, calls: list[tuple[str, Any]], results: list[Any]) -> Any:
    async def body(args: Any, ctx: Any) -> str:
        for inner, arguments in calls:
            results.append(await ctx.dispatch(inner, arguments))
        return name

    return make_tool(name, execute=body)


async def test_nested_call_identity_ids_count_per_calling_execution() -> None:
    """Ids ``<caller>:sub:1``, ``:sub:2``; parent token, root call id and scope inherited."""
    reg = ToolRegistry()
    seen: list[Any] = []
    results: list[Any] = []
    reg.register(make_tool("inner", execute=_seen(seen)))
    parents: list[Any] = []

    async def outer(args: Any, ctx: Any) -> str:
        parents.append(ctx)
        results.append(await ctx.dispatch("inner", {}))
        results.append(await ctx.dispatch("inner", {}))
        results.append(await ctx.dispatch("inner", {}, call_id="mine"))
        return "outer"

    reg.scope("agent").register(make_tool("outer", execute=outer))
    inp = ToolExecutionInput("c1", "outer", {}, signal(), root_call_id="root-1", scope="agent")
    assert text_of(await reg.execute(inp)) == "outer"
    assert [c.call_id for c in seen] == ["c1:sub:1", "c1:sub:2", "mine"]
    assert [text_of(r) for r in results] == ["inner:c1:sub:1", "inner:c1:sub:2", "inner:mine"]
    assert all(c.parent is parents[0].token for c in seen)
    assert {c.root_call_id for c in seen} == {"root-1"}
    assert {c.scope for c in seen} == {"agent"}
    assert len({id(c.token) for c in seen}) == 3


async def test_nested_dispatch_runs_the_full_pipeline_of_the_scope() -> None:
    """Pre-execute, guards and observers see the nested call; a scope guard denies it."""
    reg = ToolRegistry()
    results: list[Any] = []
    reg.register(make_tool("inner"))
    reg.register(make_tool("secret"))
    reg.register(_outer("outer", [("inner", {}), ("secret", {})], results))
    agent = reg.scope("agent")
    agent.guard(lambda e: "nested calls to secret are denied" if e.name == "secret" else None)
    observed: list[tuple[str, bool]] = []
    agent.on_result(lambda e, r: observed.append((e.call_id, e.parent is not None)))
    out = await run(reg, "outer", scope="agent")
    assert text_of(out) == "outer"
    assert text_of(results[0]) == "inner"
    assert results[1].to_wire() == {
        "isError": True,
        "content": [{"type": "text", "text": "Error: nested calls to secret are denied"}],
        "error": {"message": "nested calls to secret are denied"},
    }
    assert observed == [("c1:sub:1", True), ("c1:sub:2", True), ("c1", False)]


async def test_nested_calls_bypass_the_code_mode_collapse_r_cond_09() -> None:
    """R-COND-09: a collapsed (``code``) scope refuses model-direct calls, not nested ones."""
    reg = ToolRegistry()
    results: list[Any] = []
    reg.register(make_tool("inner"))
    reg.register(_outer("outer", [("inner", {})], results))
    reg.scope("coder").present_as("code")
    assert code_of(await run(reg, "outer", scope="coder")) == "UNKNOWN_TOOL"
    assert results == []
    executions: list[Any] = []

    async def capture(execution: Any, next_: Any) -> Any:
        executions.append(execution)
        return await next_()

    reg.on_execute(capture)
    await run(reg, "run_code", scope="coder")  # the transport (no runtime mounted here)
    run_code = executions[-1]
    nested = await run_nested(reg, run_code, "outer", {}, call_id="c1:ptc:1")
    assert text_of(nested) == "outer"
    assert text_of(results[0]) == "inner"  # outer's own ctx.dispatch, nested again
    assert executions[-1].call_id == "c1:ptc:1:sub:1"
    assert executions[-1].root_call_id == "c1"


async def test_a_nested_success_carries_no_meta_p_body_12() -> None:
    reg = ToolRegistry()
    meta_out = ToolOutput(
        schema={"type": "string"},
        render=lambda a, v: [text_block(v)],
        presentation_meta=lambda a, v: {"shown": v},
    )
    reg.register(_with_meta("inner", meta_out))
    results: list[Any] = []
    reg.register(_outer("outer", [("inner", {})], results))
    assert (await run(reg, "inner")).meta == {"shown": "inner"}
    await run(reg, "outer")
    assert results[0].meta is None


def _with_meta(name: str, output: ToolOutput) -> Any:
    base = make_tool(name)
    return type(base)(**{**_fields(base), "output": output})


def _fields(definition: Any) -> dict[str, Any]:
    return {f: getattr(definition, f) for f in definition.__dataclass_fields__}


async def test_a_nested_call_inherits_the_callers_abort() -> None:
    """The nested call's signal is the caller's: aborting the batch aborts it (ABORTED)."""
    reg = ToolRegistry()
    started = asyncio.Event()
    results: list[Any] = []

    async def waits(args: Any, ctx: Any) -> str:
        started.set()
        await ctx.signal.wait()
        return "stopped"

    reg.register(make_tool("waits", execute=waits))
    reg.register(_outer("outer", [("waits", {})], results))
    ctrl = AbortController()
    task = asyncio.ensure_future(run(reg, "outer", sig=ctrl.signal))
    await asyncio.wait_for(started.wait(), 10)
    ctrl.abort("user cancelled")
    outer = await asyncio.wait_for(task, 10)
    assert code_of(outer) == "ABORTED"
    assert code_of(results[0]) == "ABORTED"


async def test_dispatch_sync_from_a_sync_body_even_at_cap_one() -> None:
    """A sync body holding the batch's only thread still gets its nested sync call run."""
    reg = ToolRegistry()

    def inner(args: Any, ctx: Any) -> str:
        return f"inner on {threading.current_thread().name}"

    def outer(args: Any, ctx: Any) -> str:
        return text_of(ctx.dispatch_sync("inner", {}))

    reg.register(make_tool("inner", execute=inner))
    reg.register(make_tool("outer", execute=outer))
    batch = ToolBatchInput(
        [ToolCall("c1", "outer", "{}")], AbortController().signal, max_parallel_tool_calls=1
    )
    result = await asyncio.wait_for(reg.execute_batch(batch), 10)
    assert result.results[0].result.value.startswith("inner on toolray-nested")


async def test_dispatch_sync_in_an_async_body_is_refused() -> None:
    reg = ToolRegistry()
    reg.register(make_tool("inner"))

    async def outer(args: Any, ctx: Any) -> str:
        ctx.dispatch_sync("inner", {})
        return "unreachable"

    reg.register(make_tool("outer", execute=outer))
    out = await run(reg, "outer")
    assert out.error.message.startswith("dispatch_sync() would block the event loop")


async def test_a_settled_context_rejects_nested_calls() -> None:
    """A context kept past its body's return (leaked) can no longer dispatch."""
    reg = ToolRegistry()
    kept: list[Any] = []
    reg.register(make_tool("inner"))

    async def outer(args: Any, ctx: Any) -> str:
        kept.append(ctx)
        return "done"

    reg.register(make_tool("outer", execute=outer))
    await run(reg, "outer")
    with pytest.raises(ValueError, match=r"nested dispatch rejected: parent execution .* not live"):
        await kept[0].dispatch("inner", {})
    with pytest.raises(TypeError, match="dispatch\\(\\) takes a tool name"):
        await kept[0].dispatch(1, {})


async def test_nested_calls_use_the_callers_tool_set() -> None:
    """A conditional tool is callable nested only through the caller's admitted set."""
    reg = ToolRegistry()
    results: list[Any] = []
    reg.register(make_tool("cond"), when=lambda context: True)
    reg.register(_outer("outer", [("cond", {})], results))
    await run(reg, "outer")
    assert code_of(results[0]) == "UNKNOWN_TOOL"
    step = await reg.resolve(activation(None))
    await run(reg, "outer", tool_set=step)
    assert text_of(results[1]) == "cond"


async def test_nested_non_json_arguments_are_the_nested_calls_failure_p_args_4() -> None:
    reg = ToolRegistry()
    results: list[Any] = []
    reg.register(make_tool("inner"))
    reg.register(_outer("outer", [("inner", {"x": float("nan")}), ("inner", {"t": (1,)})], results))
    assert text_of(await run(reg, "outer")) == "outer"
    message = "tool execution arguments must be losslessly JSON-serializable"
    assert [r.error.message for r in results] == [message, message]
    assert [r.error.info for r in results] == [None, None]
