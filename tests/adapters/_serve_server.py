"""A toolray registry served with ``serve_mcp``, for the serve tests (run as a script).

The ``agent`` scope is exposed: a restriction hides ``secret``, a global guard denies
``delete``, and ``wait`` blocks until its call is aborted (``abort_seen`` reports why).
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolray import ToolOutput, ToolRegistry, define_tool, text_block
from toolray.adapters.mcp import serve_mcp

_seen: dict[str, Any] = {}
WAIT_S = 10


def _started() -> asyncio.Event:
    return _seen.setdefault("started", asyncio.Event())  # type: ignore[no-any-return]


def _aborted() -> asyncio.Event:
    return _seen.setdefault("aborted", asyncio.Event())  # type: ignore[no-any-return]


async def _wait(args: Any, ctx: Any) -> str:
    _started().set()
    await ctx.signal.wait()
    _seen["reason"] = str(ctx.signal.reason)
    _aborted().set()
    return "aborted"


async def _wait_started(args: Any, ctx: Any) -> str:
    await asyncio.wait_for(_started().wait(), WAIT_S)
    return "started"


async def _abort_seen(args: Any, ctx: Any) -> str:
    await asyncio.wait_for(_aborted().wait(), WAIT_S)
    return str(_seen["reason"])


def _tool(name: str, schema: dict[str, Any], body: Any, render: Any = None) -> Any:
    return define_tool(
        name=name,
        description=f"The {name} tool",
        parameters={"a": {"type": "integer"}, "b": {"type": "integer"}},
        output=ToolOutput(schema=schema, render=render or (lambda a, v: [text_block(str(v))])),
        execute=body,
    )


def build() -> ToolRegistry:
    registry = ToolRegistry()
    for definition in (
        _tool("add", {"type": "integer"}, lambda args, ctx: args["a"] + args["b"]),
        _tool("pair", {"type": "json"}, lambda args, ctx: {"a": args["a"], "b": args["b"]}),
        _tool("delete", {"type": "string"}, lambda args, ctx: "deleted"),
        _tool("secret", {"type": "string"}, lambda args, ctx: "the secret"),
        _tool(
            "pixel",
            {"type": "string"},
            lambda args, ctx: "a pixel",
            lambda a, v: [
                text_block(v),
                {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            ],
        ),
        _tool("wait", {"type": "string"}, _wait),
        _tool("wait_started", {"type": "string"}, _wait_started),
        _tool("abort_seen", {"type": "string"}, _abort_seen),
    ):
        registry.register(definition)
    registry.guard(lambda execution: "deletes need a human" if execution.name == "delete" else None)
    registry.scope("agent").restrict(deny=["secret"])
    return registry


if __name__ == "__main__":
    serve_mcp(build(), "agent")
