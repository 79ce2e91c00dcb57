"""Tools used by the Ray tests and the contract suite (pickled by value into the actors).

Bodies that must show real overlap meet at a file-system barrier: each one registers its
arrival and waits (bounded) until ``n`` have arrived — an event, not a sleep.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from toolray import ToolOutput, define_tool, text_block

_JSON_OUT = ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))])


def echo_tool(name: str = "echo", *, safe: bool = True) -> Any:
    """Echo ``text`` back (async body)."""

    async def body(args: Any, ctx: Any) -> Any:
        return {"text": args.get("text", ""), "pid": os.getpid()}

    return define_tool(
        name=name,
        description="Echo the text",
        parameters={"text": {"type": "string"}},
        output=_JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def barrier_tool(name: str, directory: str, *, safe: bool) -> Any:
    """Record start/end times; with ``n`` > 1, wait until ``n`` bodies have arrived."""

    def body(args: Any, ctx: Any) -> Any:
        start = time.monotonic()
        need = int(args.get("n", 1))
        Path(directory, f"{args['key']}.arrived").touch()
        deadline = time.monotonic() + 20
        while len(list(Path(directory).glob("*.arrived"))) < need:
            if time.monotonic() > deadline:
                raise TimeoutError("the barrier never filled: calls did not overlap")
            time.sleep(0.002)
        if args.get("hold_ms"):
            time.sleep(args["hold_ms"] / 1000)
        return {"key": args["key"], "start": start, "end": time.monotonic(), "pid": os.getpid()}

    return define_tool(
        name=name,
        description="Barrier",
        parameters={
            "key": {"type": "string", "required": True},
            "n": {"type": "integer"},
            "hold_ms": {"type": "number"},
        },
        output=_JSON_OUT,
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
        output=_JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def failing_tool(name: str = "fail") -> Any:
    """Raises a coded error."""
    from toolray import HarnessError

    def body(args: Any, ctx: Any) -> Any:
        raise HarnessError("disk full", "ENOSPC")

    return define_tool(
        name=name,
        description="Always fails",
        parameters={},
        output=_JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )
