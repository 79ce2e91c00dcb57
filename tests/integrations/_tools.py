"""Tools of the integration tests, pickled by value into Ray actors (see ``conftest.py``).

Bodies report what they saw in their value (never in a test-side list), so the same tool
works in-process and on a worker actor.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from toolray import ToolDefinition, ToolOutput, define_tool, text_block, tool


def stamp_tool(name: str = "stamp", *, safe: bool | Callable[[Any], bool] = True) -> ToolDefinition:
    """Async body: waits ``ms`` milliseconds, returns ``{"key", "start", "end"}``.

    ``start`` and ``end`` are ``time.monotonic()`` readings (one clock for every process of
    the machine), so a test tells overlapping calls from consecutive ones by their events.
    ``safe`` is the verdict of its classifier, or the classifier itself.
    """

    async def body(args: Any, ctx: Any) -> Any:
        start = time.monotonic()
        await asyncio.sleep(args["ms"] / 1000)
        return {"key": args["key"], "start": start, "end": time.monotonic()}

    return define_tool(
        name=name,
        description="Wait, then report when the call ran",
        parameters={
            "key": {"type": "string", "required": True},
            "ms": {"type": "integer", "required": True},
        },
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(v["key"])]),
        execute=body,
        is_concurrency_safe=safe if callable(safe) else lambda args: safe,
    )


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def explode(reason: str) -> str:
    """Fail with ``reason``."""
    raise RuntimeError(reason)


@tool
def secret(key: str) -> str:
    """A tool a scope restriction hides."""
    return f"secret {key}"


def image_tool(name: str = "snapshot") -> ToolDefinition:
    """Returns a text block and a 1-pixel PNG image block."""
    pixel = (
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJ"
        "AAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )

    return define_tool(
        name=name,
        description="A picture",
        parameters={},
        output=ToolOutput(
            schema={"type": "string"},
            render=lambda a, v: [
                text_block(v),
                {"type": "image", "data": pixel, "mimeType": "image/png"},
            ],
        ),
        execute=lambda args, ctx: "one pixel",
    )
