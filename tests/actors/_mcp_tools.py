"""The farm the MCP tests serve on Ray (and ``toolray serve --tools`` imports).

Bodies run in worker processes, so what a test observes crosses as files: ``nap`` writes
``<dir>/started`` once it runs and ``<dir>/aborted`` (the abort's reason) when aborted.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from toolray import TimeoutPolicy, ToolRunContext, define_environment, tool

TOKENS = {"tok-a": "a", "tok-b": "b"}


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(concurrency_safe=True)
def whoami(*, ctx: ToolRunContext) -> str:
    """The scope this call runs in."""
    return str(ctx.scope)


@tool(concurrency_safe=True)
def pause(ms: int) -> int:
    """Sleep ``ms`` milliseconds."""
    time.sleep(ms / 1000)
    return ms


@tool(concurrency_safe=True)
def crash() -> str:
    """Kill the process running this body."""
    os._exit(1)


@tool(concurrency_safe=True, timeout_ms=500)
def hang() -> str:
    """Block far past the deadline, ignoring every signal but a kill."""
    time.sleep(120)
    return "woke up"


@tool
def nap(folder: str, *, ctx: ToolRunContext) -> str:
    """Run until aborted, reporting through files in ``folder``."""
    Path(folder, "started").write_text("yes")
    deadline = time.monotonic() + 60
    while not ctx.signal.aborted and time.monotonic() < deadline:
        time.sleep(0.01)
    Path(folder, "aborted").write_text(str(ctx.signal.reason))
    return "aborted"


counter = define_environment("counter", create=lambda config: {"n": 0})


@tool(environment="counter")
def bump(*, ctx: ToolRunContext) -> int:
    """Add one to this scope's counter."""
    ctx.environment["n"] += 1
    return int(ctx.environment["n"])


@tool
def a_only() -> str:
    """Tenant a's own tool."""
    return "a_only ran"


def register(registry: Any) -> None:
    """What ``toolray serve --tools tests.actors._mcp_tools`` calls once."""
    for definition in (add, whoami, pause, crash, hang, nap, bump):
        registry.register(definition)
    registry.register_environment(counter)
    registry.scope("a").register(a_only)
    TimeoutPolicy().install(registry)
