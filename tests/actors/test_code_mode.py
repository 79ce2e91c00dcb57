"""Code Mode on Ray: ``run_code`` in a code scope, sub-calls on workers.

A scope presenting ``code`` has a working ``run_code``: the program runs in a child process
of the scope's executor actor, every binding call goes through that executor's pipeline —
the scope's guards and policies — and its body runs on a worker; the ptc records reach the
driver's log between the ``run_code`` call's own records.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.tools import deny_guard, text_echo_tool, waiting_tool
from toolray import (
    AbortController,
    LogStep,
    MemoryEventLog,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
)

pytestmark = pytest.mark.ray


def _run_code(code: str, call_id: str = "c1") -> ToolCall:
    return ToolCall(call_id, "run_code", json.dumps({"code": code, "description": "test"}))


def _code_scope(rt: Any, scope_key: str) -> Any:
    scope = rt.scope(scope_key)
    rt.owned.append(scope.present_as("code"))
    return scope


async def test_a_program_calls_tools_on_workers_through_the_scope_s_guards(
    rt: Any, scope_key: str
) -> None:
    scope = _code_scope(rt, scope_key)
    rt.owned.append(scope.register(text_echo_tool("cm_echo")))
    rt.owned.append(scope.register(text_echo_tool("cm_secret")))
    rt.owned.append(scope.guard(deny_guard("cm_secret", "not from programs")))
    log = LogStep(1, 1, MemoryEventLog())
    program = (
        "import asyncio\n"
        "a, b = await asyncio.gather(cm_echo(text='a'), tools.cm_echo(text='b'))\n"
        "try:\n    await cm_secret()\nexcept ToolCallError as e:\n    print(e.tool_name, e)\n"
        "[a['text'], b['text'], a['pid'], b['pid']]"
    )
    ex = rt.executor(scope_key)
    batch = ToolBatchInput([_run_code(program)], AbortController().signal, scope=scope_key, log=log)
    result = (await ex.execute_batch(batch)).results[0].result
    assert result.value["logs"] == ["cm_secret not from programs"]
    assert result.value["result"][:2] == ["a", "b"]
    executor_pid = (await ex.statistics()).pid
    assert {executor_pid, os.getpid()}.isdisjoint(result.value["result"][2:])  # on workers
    events = log.sink.events  # type: ignore[attr-defined]
    assert events[0]["type"] == "tool/call"
    assert events[-1]["type"] == "tool/result"
    ptc = events[1:-1]
    assert {e["type"] for e in ptc} == {"tool/ptc-dispatch-start", "tool/ptc-dispatch"}
    assert sorted(e["subCallId"] for e in ptc if e["type"] == "tool/ptc-dispatch") == [
        "c1:ptc:1",
        "c1:ptc:2",
        "c1:ptc:3",
    ]
    assert {e["parentCallId"] for e in ptc} == {"c1"}
    (span,) = [s for s in ex.last_trace if s.get("type") == "call"]
    workers = {s["callId"]: s.get("worker") for s in span["subCalls"]}
    assert workers["c1:ptc:1"]
    assert workers["c1:ptc:2"]


async def test_native_calls_collapse_and_the_prompt_comes_from_the_config(
    rt: Any, scope_key: str
) -> None:
    scope = _code_scope(rt, scope_key)
    rt.owned.append(scope.register(text_echo_tool("cm_direct")))
    ex = rt.executor(scope_key)
    direct = ToolBatchInput(
        [ToolCall("c1", "cm_direct", "{}")], AbortController().signal, scope=scope_key
    )
    failure = (await ex.execute_batch(direct)).results[0].result
    assert failure.error.info.code == "UNKNOWN_TOOL"
    assert "only `run_code` is callable directly" in failure.error.message
    sections = {s.id: s for s in rt.registry.prompt_sections(scope_key)}
    assert "`run_code` is the only tool you can call directly" in sections["tools:code-only"].text
    assert "async def cm_direct(text: str = ...) -> Any:" in sections["tools:sdk"].text
    schema = rt.registry.schemas(scope_key)[-1]
    assert schema["name"] == "run_code"
    assert "Execute a Python program" in schema["description"]


async def test_run_code_through_execute_and_a_failing_program(rt: Any, scope_key: str) -> None:
    scope = _code_scope(rt, scope_key)
    rt.owned.append(scope.register(text_echo_tool("cm_exec")))
    good = await rt.registry.execute(
        ToolExecutionInput(
            "c1",
            "run_code",
            {"code": "(await cm_exec(text='x'))['text']", "description": "one call"},
            AbortController().signal,
            scope=scope_key,
        )
    )
    assert good.value == {"logs": [], "result": "x"}
    bad = await rt.executor(scope_key).execute_batch(
        ToolBatchInput(
            [_run_code("print('so far')\n1/0")], AbortController().signal, scope=scope_key
        )
    )
    failure = bad.results[0].result
    assert failure.error.info.code == "CODE_RUN_FAILED"
    assert failure.content[0]["text"] == (
        "Error: code run failed (exception): ZeroDivisionError: division by zero\n"
        "Captured output:\nso far"
    )


async def test_a_program_on_ray_is_confined_like_a_local_one(rt: Any, scope_key: str) -> None:
    scope = _code_scope(rt, scope_key)
    rt.owned.append(scope.register(text_echo_tool("cm_conf")))
    with tempfile.NamedTemporaryFile("w", prefix="toolray-cm-secret-") as secret:
        secret.write("the executor's file")
        secret.flush()
        program = (
            "import random\nos = random._os\n"
            "def read():\n"
            "    try:\n"
            f"        return os.read(os.open({secret.name!r}, os.O_RDONLY), 100).decode()\n"
            "    except OSError as err:\n"
            "        return type(err).__name__\n"
            "[os.getpid(), os.getuid(), read()]"
        )
        result = await rt.registry.execute(
            ToolExecutionInput(
                "c1",
                "run_code",
                {"code": program, "description": "confined?"},
                AbortController().signal,
                scope=scope_key,
            )
        )
    pid, uid, read = result.value["result"]
    assert (pid, uid) == (1, 65534)  # pid 1 of its own namespace, uid 65534 inside its own
    assert read in ("FileNotFoundError", "PermissionError")


async def test_an_outer_abort_reaches_the_sub_call_on_its_worker(rt: Any, scope_key: str) -> None:
    scope = _code_scope(rt, scope_key)
    with tempfile.TemporaryDirectory(prefix="toolray-cm-") as tmp:
        rt.owned.append(scope.register(waiting_tool("cm_wait", tmp)))
        ctrl = AbortController()
        log = LogStep(1, 1, MemoryEventLog())
        batch = ToolBatchInput(
            [_run_code("await cm_wait(key='k', max_s=60)")], ctrl.signal, scope=scope_key, log=log
        )
        task = asyncio.ensure_future(rt.executor(scope_key).execute_batch(batch))
        marker = Path(tmp, "k.started")
        for _ in range(3000):  # until the sub-call's body runs on its worker
            if marker.exists() or task.done():
                break
            await asyncio.sleep(0.01)
        assert marker.exists()
        ctrl.abort("user cancelled")
        result = (await asyncio.wait_for(task, timeout=60)).results[0].result
    assert result.error.info.code == "ABORTED"
    settle = [e for e in log.sink.events if e["type"] == "tool/ptc-dispatch"]  # type: ignore[attr-defined]
    assert [(e["name"], e["isError"]) for e in settle] == [("cm_wait", True)]
