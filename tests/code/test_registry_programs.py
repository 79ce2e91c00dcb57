"""Real programs through the registry: ``run_code`` with ``PythonRuntime`` mounted.

The same contracts as ``tests/core/test_code_*`` (which play the program in-process), here
with a child process: calls through guards and policies, ids and log records, positional
arguments, ``ToolCallError``, concurrency under ``asyncio.gather``, hostile programs ending
as one structured ``run_code`` failure while the host keeps serving, an outer abort, and
programs built from random call sequences compared with the same calls made directly.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.code._helpers import child_pids
from toolray import (
    AbortController,
    Deny,
    LogStep,
    MemoryEventLog,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray.code import PythonRuntime

pytestmark = pytest.mark.asyncio


class Arrivals:
    """Who called ``meet``; its calls wait until ``expect`` of them have arrived."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.changed = asyncio.Event()

    async def meet(self, who: str, expect: int) -> None:
        self.names.append(who)
        self.changed.set()
        while len(self.names) < expect:  # a barrier: only overlapping calls pass it
            self.changed.clear()
            await asyncio.wait_for(self.changed.wait(), timeout=20)


def _tools(reg: ToolRegistry, arrivals: Arrivals) -> None:
    def out(schema: dict[str, Any]) -> ToolOutput:
        return ToolOutput(schema=schema, render=lambda a, v: [text_block(json.dumps(v))])

    async def add(args: Any, ctx: Any) -> int:
        return int(args["a"]) + int(args.get("b", 0))

    async def fail(args: Any, ctx: Any) -> Any:
        raise ValueError(f"no {args['what']}")

    async def meet(args: Any, ctx: Any) -> str:
        await arrivals.meet(args["who"], args["expect"])
        return str(args["who"])

    reg.register(
        define_tool(
            name="add",
            description="Add b (default 0) to a.",
            parameters={"a": {"type": "integer", "required": True}, "b": {"type": "integer"}},
            output=out({"type": "integer"}),
            execute=add,
            is_concurrency_safe=lambda args: True,
        )
    )
    reg.register(
        define_tool(
            name="fail",
            description="Always fails.",
            parameters={"what": {"type": "string", "required": True}},
            output=out({"type": "string"}),
            execute=fail,
        )
    )
    reg.register(
        define_tool(
            name="meet",
            description="Waits until `expect` calls have arrived.",
            parameters={
                "who": {"type": "string", "required": True},
                "expect": {"type": "integer", "required": True},
            },
            output=out({"type": "string"}),
            execute=meet,
            is_concurrency_safe=lambda args: True,
        )
    )
    reg.register(
        define_tool(
            name="secret",
            description="Guarded.",
            parameters={},
            output=out({"type": "string"}),
            execute=lambda args, ctx: "leaked",
        )
    )


@pytest.fixture(scope="module")
def runtime() -> Iterator[PythonRuntime]:
    """One runtime for the module (each run still gets a fresh child)."""
    before = child_pids()
    rt = PythonRuntime(timeout_s=30)
    yield rt
    rt.close()
    assert child_pids() - before == set()


@pytest.fixture
def arrivals() -> Arrivals:
    return Arrivals()


@pytest.fixture
def reg(runtime: PythonRuntime, arrivals: Arrivals) -> ToolRegistry:
    registry = ToolRegistry(mode="code", code_runtime=runtime)
    _tools(registry, arrivals)
    registry.scope("agent").guard(lambda e: "not for programs" if e.name == "secret" else None)
    return registry


async def run_code(
    reg: ToolRegistry, code: str, *, log: LogStep | None = None, signal: Any = None
) -> ToolExecutionResult:
    return await reg.execute(
        ToolExecutionInput(
            "call-1",
            "run_code",
            {"code": code, "description": "Test program"},
            signal if signal is not None else AbortController().signal,
            scope="agent",
            log=log,
        )
    )


async def test_a_program_calls_tools_through_guards_and_policies(reg: ToolRegistry) -> None:
    reg.on_pre_execute(lambda e, nxt: Deny("policy says no") if e.name == "fail" else nxt())
    log = LogStep(3, 4, MemoryEventLog())
    program = """
total = await tools.add(a=1, b=2) + await add(40)
try:
    await tools.secret()
except ToolCallError as err:
    print(err.tool_name, "->", err)
try:
    await fail(what="x")
except ToolCallError as err:
    print(err.tool_name, "->", err)
{"total": total}
"""
    result = await run_code(reg, program, log=log)
    assert result.value == {
        "logs": ["secret -> not for programs", "fail -> policy says no"],
        "result": {"total": 43},
    }
    assert result.content[0]["text"] == (
        'secret -> not for programs\nfail -> policy says no\n{\n  "total": 43\n}'
    )
    sink = log.sink
    assert isinstance(sink, MemoryEventLog)
    settled = [(e["subCallId"], e["name"], e["isError"]) for e in sink.events[1::2]]
    assert settled == [
        ("call-1:ptc:1", "add", False),
        ("call-1:ptc:2", "add", False),
        ("call-1:ptc:3", "secret", True),
        ("call-1:ptc:4", "fail", True),
    ]
    assert sink.events[2]["arguments"] == {"a": 40}  # positional → the stub's order


async def test_a_failed_tool_raises_tool_call_error_with_the_message_only(
    reg: ToolRegistry,
) -> None:
    program = "try:\n    await fail(what='luck')\nexcept ToolCallError as e:\n    m = str(e)\nm"
    assert (await run_code(reg, program)).value == {"logs": [], "result": "no luck"}


async def test_gathered_safe_calls_overlap(reg: ToolRegistry, arrivals: Arrivals) -> None:
    program = (
        "import asyncio\nawait asyncio.gather(*(meet(who=str(i), expect=3) for i in range(3)))"
    )
    result = await run_code(reg, program)
    assert result.value == {"logs": [], "result": ["0", "1", "2"]}
    assert sorted(arrivals.names) == ["0", "1", "2"]


async def test_non_json_binding_arguments_are_refused_in_the_program(reg: ToolRegistry) -> None:
    log = LogStep(1, 1, MemoryEventLog())
    program = "try:\n    await add(a={1, 2})\nexcept ToolCallError as e:\n    m = str(e)\nm"
    result = await run_code(reg, program, log=log)
    assert result.value["result"].startswith("tool arguments must be lossless JSON")
    assert log.sink.events == []  # type: ignore[attr-defined]


async def test_the_batch_log_carries_the_ptc_records_inside_the_run_code_pair(
    reg: ToolRegistry,
) -> None:
    log = LogStep(1, 1, MemoryEventLog())
    code = json.dumps({"code": "await add(a=1)", "description": "one call"})
    batch = ToolBatchInput(
        [ToolCall("c9", "run_code", code)], AbortController().signal, scope="agent", log=log
    )
    result = await reg.execute_batch(batch)
    assert result.results[0].result.value == {"logs": [], "result": 1}
    kinds = [e["type"] for e in log.sink.events]  # type: ignore[attr-defined]
    assert kinds == ["tool/call", "tool/ptc-dispatch-start", "tool/ptc-dispatch", "tool/result"]


HOSTILE = {
    "syntax error": ("def f(:\n  pass", "code run failed (syntax): SyntaxError: "),
    "exception": ("[][1]", "code run failed (exception): IndexError: "),
    "non-JSON last expression": ("object()", "code run failed (invalid-output): "),
    "import os": ("import os", 'code run failed (import): module "os"'),
    "infinite loop": ("while True:\n    pass", "code run timed out after 1000ms"),
    "fork bomb": (
        "import random\nos = random._os\nwhile True:\n    os.fork()",
        "code run failed (exception): PermissionError",
    ),
    "memory hog": (
        "hog = []\nwhile True:\n    hog.append('x' * 10**6)",
        "code run failed (memory): MemoryError",
    ),
}


@pytest.mark.parametrize("case", HOSTILE.values(), ids=HOSTILE.keys())
async def test_a_hostile_program_is_one_structured_failure(case: tuple[str, str]) -> None:
    program, message = case
    hostile = PythonRuntime(timeout_s=1, memory_mb=128, warm=0)  # one fresh child per run
    reg = ToolRegistry(mode="code", code_runtime=hostile)
    _tools(reg, Arrivals())
    before = child_pids()
    result = await run_code(reg, "await add(a=1)\n" + program)
    assert result.is_error
    assert result.content[0]["text"].startswith(f"Error: {message}")
    code = result.error.info.code  # type: ignore[union-attr]
    assert code == ("TOOL_TIMEOUT" if "timed out" in message else "CODE_RUN_FAILED")
    assert child_pids() - before == set()  # its process is gone
    assert (await run_code(reg, "await add(a=2)")).value == {"logs": [], "result": 2}
    assert child_pids() - before == set()


async def test_an_outer_abort_kills_the_program_and_reports_aborted(reg: ToolRegistry) -> None:
    ctrl = AbortController()
    reg.on_result(lambda e, r: ctrl.abort("user-cancel") if e.name == "add" else None)
    result = await run_code(reg, "await add(a=1)\nwhile True:\n    pass", signal=ctrl.signal)
    assert result.error.info.code == "ABORTED"  # type: ignore[union-attr]
    assert "user-cancel" in result.content[0]["text"]


# ---------------------------------------------------------------- random programs
CALLS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(-100, 100), st.none() | st.integers(-5, 5)),
        st.tuples(st.just("fail"), st.sampled_from(["x", "y"]), st.none()),
        st.tuples(st.just("secret"), st.none(), st.none()),
    ),
    max_size=6,
)


def _program(calls: list[tuple[str, Any, Any]], gather: bool) -> str:
    exprs = []
    for name, first, second in calls:
        if name == "add":
            args = f"a={first}" + (f", b={second}" if second is not None else "")
        elif name == "fail":
            args = f"what={first!r}"
        else:
            args = ""
        exprs.append(f"outcome(tools.{name}({args}))")
    head = (
        "import asyncio\n"
        "async def outcome(call):\n"
        "    try:\n        return ['ok', await call]\n"
        "    except ToolCallError as err:\n        return ['error', err.tool_name, str(err)]\n"
    )
    if gather:
        return head + f"list(await asyncio.gather({', '.join(exprs)}))"
    return head + "out = []\n" + "".join(f"out.append(await {e})\n" for e in exprs) + "out"


async def _reference(calls: list[tuple[str, Any, Any]]) -> list[Any]:
    """The same calls made directly on a native registry with the same tools and guard."""
    reg = ToolRegistry()
    _tools(reg, Arrivals())
    reg.scope("agent").guard(lambda e: "not for programs" if e.name == "secret" else None)
    expected: list[Any] = []
    for n, (name, first, second) in enumerate(calls):
        if name == "add":
            args = {"a": first} | ({"b": second} if second is not None else {})
        elif name == "fail":
            args = {"what": first}
        else:
            args = {}
        result = await reg.execute(
            ToolExecutionInput(f"ref-{n}", name, args, AbortController().signal, scope="agent")
        )
        expected.append(
            ["error", name, result.error.message] if result.is_error else ["ok", result.value]
        )
    return expected


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=CALLS, gather=st.booleans())
def test_random_programs_match_the_same_calls_made_directly(
    runtime: PythonRuntime, calls: list[tuple[str, Any, Any]], gather: bool
) -> None:
    reg = ToolRegistry(mode="code", code_runtime=runtime)
    _tools(reg, Arrivals())
    reg.scope("agent").guard(lambda e: "not for programs" if e.name == "secret" else None)
    ids: list[str] = []
    reg.on_result(lambda e, r: ids.append(e.call_id) if e.parent is not None else None)
    result = asyncio.run(run_code(reg, _program(calls, gather)))
    assert not result.is_error, result.content
    assert ids == [f"call-1:ptc:{n}" for n in range(1, len(calls) + 1)]
    assert result.value["result"] == asyncio.run(_reference(calls))
