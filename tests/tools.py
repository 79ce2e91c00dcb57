"""Tool factories shared by the Ray tests and the contract suite.

This module is pickled by value into the Ray actors (``cloudpickle.register_pickle_by_value``
in ``tests/conftest.py`` and ``tests/contract/conftest.py``), so its bodies run unchanged in
another process. Nothing here appends to a test-side list: a body reports what it saw in its
value, its deferred contexts, or (for "I have started" signals a test must wait on) a marker
file in a directory the test owns.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from toolray import (
    Accept,
    HarnessError,
    ToolDefinition,
    ToolOutput,
    UserMessage,
    define_tool,
    text_block,
)


def _render_json(args: Any, value: Any) -> list[Any]:
    return [text_block(json.dumps(value, sort_keys=True))]


def _render_text(args: Any, value: Any) -> list[Any]:
    return [text_block(str(value))]


JSON_OUT = ToolOutput(schema={"type": "json"}, render=_render_json)
TEXT_OUT = ToolOutput(schema={"type": "string"}, render=_render_text)


class QuotaError(HarnessError):
    """A tool-owned coded error (its class travels by value with this module)."""

    default_code = "QUOTA_EXCEEDED"


def echo_tool(name: str, *, safe: bool = True) -> ToolDefinition:
    """Async body: ``{"echo": <arguments>}``."""

    async def body(args: Any, ctx: Any) -> Any:
        return {"echo": args}

    return define_tool(
        name=name,
        description="Echo the arguments",
        parameters={"text": {"type": "string"}},
        output=JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def upper_tool(name: str, *, safe: bool = True) -> ToolDefinition:
    """Sync body (thread pool): the upper-cased ``text``."""

    def body(args: Any, ctx: Any) -> Any:
        return str(args["text"]).upper()

    return define_tool(
        name=name,
        description="Upper-case the text",
        parameters={"text": {"type": "string", "required": True}},
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def raw_echo_tool(name: str) -> ToolDefinition:
    """A raw ``ToolDefinition`` (no ``define_tool`` argument check): returns its arguments."""

    def body(args: Any, ctx: Any) -> Any:
        return {"received": args}

    return ToolDefinition(
        name=name,
        description="Echo whatever arrives",
        parameters={"type": "object"},
        output=ToolOutput(schema={}, render=_render_json),
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def constant_tool(name: str, value: str) -> ToolDefinition:
    """Returns ``value`` (tells a scoped shadow from the global entry)."""

    def body(args: Any, ctx: Any) -> Any:
        return value

    return define_tool(
        name=name,
        description=f"Returns {value}",
        parameters={},
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def failing_tool(
    name: str = "fail", kind: str = "harness", *, defer: str | None = None
) -> ToolDefinition:
    """Raises: ``harness`` (ENOSPC), ``subclass`` (QuotaError) or ``plain`` (ValueError).

    With ``defer``, the body defers a context before raising (it survives the throw).
    """

    def body(args: Any, ctx: Any) -> Any:
        if defer is not None:
            ctx.defer_context(UserMessage([text_block(defer)], source=name))
        if kind == "harness":
            raise HarnessError("disk full", "ENOSPC")
        if kind == "subclass":
            raise QuotaError("quota exceeded for today")
        raise ValueError("plain failure")

    return define_tool(
        name=name,
        description="Always fails",
        parameters={},
        output=JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def bad_output_tool(name: str) -> ToolDefinition:
    """Declares a string output and returns ``42``."""

    async def body(args: Any, ctx: Any) -> Any:
        return 42

    return define_tool(
        name=name,
        description="Breaks its output contract",
        parameters={},
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def context_tool(name: str, *, safe: bool = True) -> ToolDefinition:
    """Defers one context per entry of ``notes`` (in order); concludes if ``conclude``."""

    async def body(args: Any, ctx: Any) -> Any:
        for note in args.get("notes", []):
            ctx.defer_context(UserMessage([text_block(note)], source=name, meta={"note": note}))
        if args.get("conclude"):
            ctx.conclude_turn()
        return "noted"

    return define_tool(
        name=name,
        description="Defers contexts",
        parameters={
            "notes": {"type": "array", "items": {"type": "string"}},
            "conclude": {"type": "boolean"},
        },
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def waiting_tool(
    name: str, directory: str, *, timeout_ms: float | None = None, safe: bool = True
) -> ToolDefinition:
    """Cooperative: marks ``<directory>/<key>.started``, then waits for its signal.

    With ``note``, it first defers a context. Returns ``"stopped"`` when the signal fires,
    ``"never stopped"`` after ``max_s`` seconds (a bound: a lost abort fails, never hangs).
    """

    async def body(args: Any, ctx: Any) -> Any:
        if args.get("note"):
            ctx.defer_context(UserMessage([text_block(args["note"])], source=name))
        Path(directory, f"{args['key']}.started").touch()
        try:
            await asyncio.wait_for(ctx.signal.wait(), timeout=float(args.get("max_s", 10)))
        except TimeoutError:
            return "never stopped"
        return "stopped"

    return define_tool(
        name=name,
        description="Waits for its signal",
        parameters={
            "key": {"type": "string", "required": True},
            "max_s": {"type": "number"},
            "note": {"type": "string"},
        },
        output=TEXT_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: safe,
    )


def quick_tool(name: str, *, timeout_ms: float | None = None) -> ToolDefinition:
    """Returns at once (a budgeted tool that finishes in time keeps its result)."""

    async def body(args: Any, ctx: Any) -> Any:
        return "quick"

    return define_tool(
        name=name,
        description="Returns at once",
        parameters={},
        output=TEXT_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: True,
    )


def deny_guard(tool_name: str, reason: str) -> Any:
    """A guard denying calls of ``tool_name`` (abstains for every other tool)."""

    def guard(execution: Any) -> str | None:
        return reason if execution.name == tool_name else None

    return guard


def post_note(tool_name: str, note: str) -> Any:
    """A post-execute listener adding a context to every call of ``tool_name``."""

    async def listener(execution: Any, result: Any, next_: Any) -> Any:
        decision = await next_()
        if execution.name != tool_name:
            return decision
        return Accept(additional_contexts=[UserMessage([text_block(note)], source="post")])

    return listener


# ---------------------------------------------------------------- Ray-layer tools
_STR_OUT = ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))])


def text_echo_tool(name: str = "echo", *, safe: bool = True) -> Any:
    """Echo ``text`` back with the pid of the process that ran the body (async body)."""

    async def body(args: Any, ctx: Any) -> Any:
        return {"text": args.get("text", ""), "pid": os.getpid()}

    return define_tool(
        name=name,
        description="Echo the text",
        parameters={"text": {"type": "string"}},
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def cooperative_tool(name: str = "cooperative") -> Any:
    """Waits for its signal (or 30 s) and then returns normally."""

    async def body(args: Any, ctx: Any) -> Any:
        try:
            await asyncio.wait_for(ctx.signal.wait(), timeout=30)
        except TimeoutError:
            return "finished"
        return "stopped"

    return define_tool(
        name=name,
        description="Cooperative",
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def stubborn_tool(name: str, kind: str, *, timeout_ms: float | None = None) -> Any:
    """Ignores its signal: ``sleep_loop`` (short sleeps), ``cpu`` (a Python loop) or
    ``block`` (one long C-level sleep that only a kill stops)."""

    def body(args: Any, ctx: Any) -> Any:
        end = time.monotonic() + float(args.get("seconds", 30))
        if kind == "block":
            time.sleep(end - time.monotonic())
        elif kind == "cpu":
            x = 0
            while time.monotonic() < end:
                x += 1
        else:
            while time.monotonic() < end:
                time.sleep(0.01)
        return "ignored the signal"

    return define_tool(
        name=name,
        description=f"Stubborn ({kind})",
        parameters={"seconds": {"type": "number"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: True,
    )


def crash_tool(name: str = "crash") -> Any:
    """Kills its own worker process."""

    def body(args: Any, ctx: Any) -> Any:
        os._exit(17)

    return define_tool(
        name=name,
        description="Crash the worker",
        parameters={},
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def gate_tool(name: str, directory: str, *, safe: bool = True) -> Any:
    """Marks ``<directory>/<key>.started``, then waits until ``<key>.open`` exists.

    Ignores its signal (only the gate opens it); returns ``{"key", "pid"}`` once open, or
    ``"never opened"`` after ``max_s`` seconds (a bound: a test that forgets fails, never
    hangs). ``safe=False`` makes every call an exclusive barrier.
    """

    async def body(args: Any, ctx: Any) -> Any:
        key = args["key"]
        Path(directory, f"{key}.started").touch()
        gate = Path(directory, f"{key}.open")
        end = time.monotonic() + float(args.get("max_s", 20))
        while not gate.exists():
            if time.monotonic() > end:
                return "never opened"
            await asyncio.sleep(0.005)
        return {"key": key, "pid": os.getpid()}

    return define_tool(
        name=name,
        description="Waits for its gate file",
        parameters={"key": {"type": "string", "required": True}, "max_s": {"type": "number"}},
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def deaf_async_tool(name: str, *, timeout_ms: float | None = None) -> Any:
    """An async body that ignores its signal (only a task cancel or a kill stops it)."""

    async def body(args: Any, ctx: Any) -> Any:
        await asyncio.sleep(float(args.get("seconds", 30)))
        return "ignored the signal"

    return define_tool(
        name=name,
        description="Deaf (async)",
        parameters={"seconds": {"type": "number"}},
        output=_STR_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: True,
    )
