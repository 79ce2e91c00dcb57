"""RayRuntime basics: registry actor writes and reads, consistency, pickling errors."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.tools import text_echo_tool
from toolray import AbortController, ToolBatchInput, ToolCall, ToolOutput, define_tool, text_block

pytestmark = pytest.mark.ray


def _batch(calls: list[ToolCall], scope: str, **kw: Any) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope, **kw)


async def test_register_is_visible_to_the_next_call_and_dispose_hides_it(
    rt: Any, scope_key: str
) -> None:
    ex = rt.executor(scope_key)
    first = await ex.execute_batch(
        _batch([ToolCall("c1", "rt_echo_a", '{"text": "x"}')], scope_key)
    )
    assert first.results[0].result.error.info.code == "UNKNOWN_TOOL"
    dispose = rt.registry.register(text_echo_tool("rt_echo_a"))
    try:
        after = await ex.execute_batch(
            _batch([ToolCall("c1", "rt_echo_a", '{"text": "x"}')], scope_key)
        )
        assert after.results[0].result.value["text"] == "x"
    finally:
        dispose()
    gone = await ex.execute_batch(_batch([ToolCall("c1", "rt_echo_a", '{"text": "x"}')], scope_key))
    assert gone.results[0].result.error.info.code == "UNKNOWN_TOOL"


async def test_scoped_registration_and_restriction_through_the_actor(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("rt_glob")))
    scope = rt.scope(scope_key)
    rt.owned.append(scope.register(text_echo_tool("rt_local")))
    names = [s["name"] for s in rt.registry.schemas(scope_key)]
    assert "rt_glob" in names
    assert "rt_local" in names
    assert "rt_local" not in [s["name"] for s in rt.registry.schemas()]
    lift = scope.restrict(deny=["rt_glob"])
    try:
        assert "rt_glob" not in [s["name"] for s in rt.registry.schemas(scope_key)]
        out = await rt.executor(scope_key).execute_batch(
            _batch([ToolCall("c1", "rt_glob", "{}"), ToolCall("c2", "rt_local", "{}")], scope_key)
        )
        assert out.results[0].result.error.message == 'unknown tool "rt_glob"'
        assert not out.results[1].result.is_error
    finally:
        lift()
    scope.dispose()
    assert "rt_local" not in [s["name"] for s in rt.registry.schemas(scope_key)]


def test_core_validation_errors_cross_unchanged(rt: Any) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("rt_dup")))
    with pytest.raises(
        ValueError,
        match=r'tool "rt_dup" is already registered.*; pass replace=True to swap it$',
    ):
        rt.registry.register(text_echo_tool("rt_dup", safe=False))
    with pytest.raises(ValueError, match="requires a scoped context"):
        rt.registry.restrict(deny=["rt_dup"])


def test_an_unpicklable_definition_fails_register_naming_the_tool(rt: Any) -> None:
    lock = threading.Lock()

    def body(args: Any, ctx: Any) -> str:
        with lock:
            return "x"

    tool = define_tool(
        name="rt_unpicklable",
        description=None,
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
    )
    with pytest.raises(TypeError, match='tool "rt_unpicklable" cannot be pickled'):
        rt.registry.register(tool)
    assert "rt_unpicklable" not in [s["name"] for s in rt.registry.schemas()]


async def test_stream_batch_yields_each_result_in_model_order(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("rt_stream")))
    calls = [ToolCall(f"c{i}", "rt_stream", f'{{"text": "t{i}"}}') for i in range(4)]
    seen = [
        (i, r.call_id, r.result.value["text"])
        async for i, r in rt.executor(scope_key).stream_batch(_batch(calls, scope_key))
    ]
    assert seen == [(i, f"c{i}", f"t{i}") for i in range(4)]


def test_execute_batch_sync_and_single_execute(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("rt_sync")))
    result = rt.executor(scope_key).execute_batch_sync(
        _batch([ToolCall("c1", "rt_sync", '{"text": "s"}')], scope_key)
    )
    assert result.results[0].result.value["text"] == "s"


async def test_remote_registry_runs_batches_and_lists_definitions(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("rt_via_registry")))
    out = await rt.registry.execute_batch(
        _batch([ToolCall("c1", "rt_via_registry", '{"text": "r"}')], scope_key)
    )
    assert out.results[0].result.value["text"] == "r"
    assert "rt_via_registry" in [d.name for d in rt.registry.definitions(scope_key)]


class _AlwaysRejects:
    async def request(self, request: Any) -> str:
        return "rejected"


async def test_a_remote_approval_service_answers_ask_in_the_executor(
    rt: Any, scope_key: str
) -> None:
    from toolray import Allow, Ask

    rt.owned.append(rt.registry.register(text_echo_tool("rt_needs_ok")))

    async def ask_for_rt_needs_ok(execution: Any, next_: Any) -> Any:
        return Ask("check") if execution.name == "rt_needs_ok" else Allow()

    rt.owned.append(rt.registry.on_pre_execute(ask_for_rt_needs_ok))
    rt.owned.append(rt.registry.set_approval(_AlwaysRejects()))
    out = await rt.executor(scope_key).execute_batch(
        _batch([ToolCall("c1", "rt_needs_ok", "{}")], scope_key)
    )
    assert out.results[0].result.error.message == 'the user rejected tool "rt_needs_ok"'
