"""Fault classes: every code has exactly one class, every failure carries one (API §28).

The walk is twofold. Statically, every code the source of both packages can produce — a
``default_code``, a code constant of ``toolray.errors``, a code a ``HarnessError`` is raised
with — and the environment codes must be in ``FAULT_CLASSES``. Dynamically, a batch runs
one call per way a call can fail in-process, and each result's ``error.fault`` must be the
table's class for its code (or the pipeline's own class for an uncoded failure).
"""

from __future__ import annotations

import asyncio
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from toolray import (
    FAULT_CLASSES,
    AbortController,
    Allow,
    Block,
    Deny,
    RateLimit,
    TimeoutPolicy,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionInput,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    define_tool,
    errors,
    text_block,
)
from toolray.testing import FakeClock

ROOT = Path(__file__).resolve().parents[2]
CLASSES = ("input", "policy", "tool", "infra", "cancelled")
ENVIRONMENT_CODES = {"ENVIRONMENT_LOST": "infra", "ENVIRONMENT_FAILED": "tool"}
ENVIRONMENT_CODES["UNKNOWN_ENVIRONMENT"] = "input"

_CODE = r"[A-Z][A-Z0-9_]{2,}"
_PATTERNS = (
    re.compile(rf'default_code\s*(?::\s*\w+(?:\[\w+\])?\s*)?=\s*"({_CODE})"'),
    re.compile(rf'(?:Error|HarnessError)\([^()]*,\s*"({_CODE})"\)'),
)
_CONSTANTS = re.compile(rf'^TOOL_\w+\s*=\s*"({_CODE})"', re.MULTILINE)


def source_codes() -> set[str]:
    """Every failure code written in the source of ``toolray`` and ``toolray_actors``.

    ``TOOL_ERROR`` (the metrics' label of an uncoded failure) is a label, not a code.
    """
    found = set(_CONSTANTS.findall((ROOT / "src" / "toolray" / "errors.py").read_text()))
    for package in (ROOT / "src" / "toolray", ROOT / "actors" / "toolray_actors"):
        for path in package.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            for pattern in _PATTERNS:
                found.update(pattern.findall(text))
    return found - {"ENOSPC"}  # the doctest's example of a user's own code


def test_the_walk_finds_the_codes_it_looks_for() -> None:
    codes = source_codes()
    assert {"INVALID_ARGS", "WORKER_LOST", "RUNTIME_UNAVAILABLE", "MCP_TOOL_ERROR"} <= codes
    assert {"ABORTED", "ABORTED_BEFORE_DISPATCH", "DEADLINE_EXCEEDED", "OVERLOADED"} <= codes


def test_every_code_of_the_codebase_has_exactly_one_fault_class() -> None:
    missing = sorted((source_codes() | set(ENVIRONMENT_CODES)) - set(FAULT_CLASSES))
    assert missing == [], f"give these codes a fault class in toolray._faults: {missing}"
    assert set(FAULT_CLASSES.values()) == set(CLASSES)
    for code, fault in ENVIRONMENT_CODES.items():
        assert FAULT_CLASSES[code] == fault


def test_every_error_class_code_is_classified() -> None:
    def walk(cls: type[errors.HarnessError]) -> list[type[errors.HarnessError]]:
        return [cls, *(c for sub in cls.__subclasses__() for c in walk(sub))]

    ours = [c for c in walk(errors.HarnessError) if c.__module__.startswith("toolray")]
    assert errors.OverloadedError in ours
    for cls in ours:  # a test's own error classes (QUOTA_EXCEEDED…) are users' codes
        assert cls.default_code in FAULT_CLASSES, cls


def test_the_table_is_read_only_and_names_the_spec_examples() -> None:
    assert isinstance(FAULT_CLASSES, Mapping)
    with pytest.raises(TypeError):
        FAULT_CLASSES["X"] = "tool"  # type: ignore[index]
    expected = {
        "INVALID_ARGS": "input",
        "UNKNOWN_TOOL": "input",
        "NOT_JSON": "input",
        "RATE_LIMITED": "policy",
        "INVALID_TOOL_OUTPUT": "tool",
        "RESULT_TOO_LARGE": "tool",
        "TOOL_TIMEOUT": "tool",
        "WORKER_LOST": "infra",
        "EXECUTOR_LOST": "infra",
        "EXECUTOR_UNAVAILABLE": "infra",
        "HARNESS_ERROR": "infra",
        "OVERLOADED": "infra",
        "ABORTED": "cancelled",
        "ABORTED_BEFORE_DISPATCH": "cancelled",
        "DEADLINE_EXCEEDED": "cancelled",
    }
    assert {code: FAULT_CLASSES[code] for code in expected} == expected


# ---------------------------------------------------------------------- the value
def test_a_failure_takes_its_class_from_its_code() -> None:
    lost = ToolFailure("gone", ToolErrorInfo("ToolWorkerLostError", "WORKER_LOST"))
    assert lost.fault == "infra"
    assert ToolFailure("boom").fault == "tool"  # a body's own exception: no info
    assert ToolFailure("mine", ToolErrorInfo("HarnessError", "MY_CODE")).fault == "tool"
    assert ToolFailure("no", fault="policy").fault == "policy"
    with pytest.raises(ValueError, match="fault must be one of"):
        ToolFailure("x", fault="weather")  # type: ignore[arg-type]


def test_a_failure_pickles_with_its_class_and_compares_without_it() -> None:
    denied = ToolFailure("no", None, "policy")
    back = pickle.loads(pickle.dumps(denied))
    assert back.fault == "policy"
    assert back == denied == ToolFailure("no")  # equality: message and info
    assert denied.to_wire() == {"message": "no"}  # the durable record is unchanged


# ---------------------------------------------------------------------- every way to fail
def _render(args: Any, value: Any) -> list[Any]:
    return [text_block(str(value))]


def _tool(name: str, execute: Any, **extra: Any) -> Any:
    return define_tool(
        name=name,
        description=name,
        parameters={"n": {"type": "integer"}},
        output=ToolOutput(schema={"type": "string"}, render=_render),
        execute=execute,
        is_concurrency_safe=lambda args: True,
        **extra,
    )


def _raiser(error: BaseException) -> Any:
    def execute(args: Any, ctx: Any) -> str:
        raise error

    return execute


def _registry() -> tuple[ToolRegistry, FakeClock]:
    clock = FakeClock(autojump=True)
    reg = ToolRegistry(clock=clock, max_result_bytes=64)
    TimeoutPolicy().install(reg)

    async def slow(args: Any, ctx: Any) -> str:
        await clock.sleep(10)
        return "late"

    async def wait_for_abort(args: Any, ctx: Any) -> str:
        await ctx.signal.wait()
        return "stopped"

    reg.register(_tool("ok", lambda a, c: "fine"))
    reg.register(_tool("boom", _raiser(RuntimeError("kaboom"))))
    reg.register(_tool("lost", _raiser(errors.ToolWorkerLostError("gone"))))
    reg.register(_tool("mine", _raiser(errors.HarnessError("disk full", "MY_CODE"))))
    reg.register(_tool("bad_output", lambda a, c: 42))
    reg.register(_tool("huge", lambda a, c: "x" * 1000))
    reg.register(_tool("slow", slow, timeout_ms=100))
    reg.register(_tool("waits", wait_for_abort))
    reg.register(_tool("limited", lambda a, c: "ok", rate_limit=RateLimit(1, max_wait_ms=10)))
    reg.register(_tool("guarded", lambda a, c: "ok"))
    reg.register(_tool("denied", lambda a, c: "ok"))
    reg.register(_tool("blocked", lambda a, c: "ok"))
    reg.guard(lambda execution: "not here" if execution.name == "guarded" else None)

    async def pre(execution: Any, next_: Any) -> Any:
        if execution.name == "denied":
            return Deny("refused", ToolErrorInfo("PolicyError", "MY_POLICY"))
        return Allow() if execution.name == "ok" else await next_()

    async def post(execution: Any, result: Any, next_: Any) -> Any:
        if execution.name == "blocked":
            return Block([text_block("hidden")])
        return await next_()

    reg.on_pre_execute(pre)
    reg.on_post_execute(post)
    return reg, clock


CASES = (
    ("ok", "{}", None, None),
    ("boom", "{}", None, "tool"),
    ("lost", "{}", "WORKER_LOST", "infra"),
    ("mine", "{}", "MY_CODE", "tool"),
    ("bad_output", "{}", "INVALID_TOOL_OUTPUT", "tool"),
    ("huge", "{}", "RESULT_TOO_LARGE", "tool"),
    ("slow", "{}", "TOOL_TIMEOUT", "tool"),
    ("ok", '{"n": "x"}', "INVALID_ARGS", "input"),
    ("nope", "{}", "UNKNOWN_TOOL", "input"),
    ("limited", "{}", None, None),  # the bucket's one token
    ("limited", "{}", "RATE_LIMITED", "policy"),  # none left within max_wait_ms
    ("guarded", "{}", None, "policy"),
    ("denied", "{}", "MY_POLICY", "policy"),  # a denial's own code is still a denial
    ("blocked", "{}", None, "policy"),
)


async def test_each_way_to_fail_carries_its_fault_class() -> None:
    reg, _ = _registry()
    calls = [ToolCall(f"c{k}", name, args) for k, (name, args, _, _) in enumerate(CASES)]
    result = await reg.execute_batch(ToolBatchInput(calls, max_parallel_tool_calls=1))
    seen = []
    for item in result.results:
        outcome = item.result
        if isinstance(outcome, ToolExecutionFailure):
            info = outcome.error.info
            seen.append((info.code if info else None, outcome.error.fault))
        else:
            seen.append((None, None))
    assert seen == [(code, fault) for _, _, code, fault in CASES]
    for code, fault in seen:
        if code in FAULT_CLASSES:
            assert fault == FAULT_CLASSES[code]
    assert dict(result.faults) == {"input": 2, "policy": 4, "tool": 5, "infra": 1, "cancelled": 0}


async def test_arguments_that_are_not_json_are_the_input_s_fault() -> None:
    reg, _ = _registry()
    inp = ToolExecutionInput("c1", "ok", {"n": {1, 2}}, AbortController().signal)
    result = await reg.execute(inp)
    assert isinstance(result, ToolExecutionFailure)
    assert (result.error.info, result.error.fault) == (None, "input")


async def test_aborts_are_cancelled_and_counted() -> None:
    reg, _ = _registry()
    ctrl = AbortController()
    calls = [ToolCall("c1", "waits", "{}"), ToolCall("c2", "ok", "{}")]
    run = asyncio.ensure_future(
        reg.execute_batch(ToolBatchInput(calls, ctrl.signal, max_parallel_tool_calls=1))
    )
    await asyncio.sleep(0.01)
    ctrl.abort("user")
    result: ToolBatchResult = await asyncio.wait_for(run, 5)
    codes = [r.result.error.info.code for r in result.results]  # type: ignore[union-attr]
    assert codes == ["ABORTED", "ABORTED_BEFORE_DISPATCH"]
    assert [r.result.error.fault for r in result.results] == ["cancelled"] * 2  # type: ignore[union-attr]
    assert result.faults["cancelled"] == 2
    assert list(result.faults) == list(CLASSES)
