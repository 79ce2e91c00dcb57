"""The farm the MCP HTTP tests serve: tenants, a crashing and a hanging tool, an environment.

- global: ``add``, ``whoami`` (the scope a call ran in), ``crash``, ``slow`` (300 ms
  deadline), ``wait`` / ``wait_started`` / ``abort_seen`` (a call blocked until aborted,
  keyed so tests do not share one), ``bump`` (the ``counter`` environment);
- scope ``a``: ``a_only``; scope ``b``: ``b_only``; scope ``org/team`` (a child of ``org``):
  ``team_only``.
Tokens: ``tok-a`` → ``a``, ``tok-a2`` → ``a`` (another client of tenant ``a``),
``tok-b`` → ``b``, ``tok-org`` → ``org``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from toolray import TimeoutPolicy, ToolRegistry, ToolRunContext, define_environment, tool

TOKENS = {"tok-a": "a", "tok-a2": "a", "tok-b": "b", "tok-org": "org"}
WAIT_S = 30
CLOSED: list[Any] = []
"""The states of ``counter`` instances that were closed (their ``close`` ran)."""

_events: dict[str, asyncio.Event] = {}
_reasons: dict[str, str] = {}


def _event(name: str) -> asyncio.Event:
    return _events.setdefault(name, asyncio.Event())


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(concurrency_safe=True)
def whoami(*, ctx: ToolRunContext) -> str:
    """The scope this call runs in."""
    return str(ctx.scope)


@tool
def crash() -> str:
    """Fail."""
    raise RuntimeError("the crash tool crashed")


@tool(timeout_ms=300)
async def slow(*, ctx: ToolRunContext) -> str:
    """Run far past its deadline, unless aborted (in process a deadline cannot kill a body)."""
    await asyncio.wait_for(ctx.signal.wait(), WAIT_S)
    return "stopped"


@tool
async def wait(key: str, *, ctx: ToolRunContext) -> str:
    """Block until this call is aborted."""
    _event(f"started:{key}").set()
    await ctx.signal.wait()
    _reasons[key] = str(ctx.signal.reason)
    _event(f"aborted:{key}").set()
    return "aborted"


@tool
async def wait_started(key: str) -> str:
    """Return once ``wait(key)`` runs."""
    await asyncio.wait_for(_event(f"started:{key}").wait(), WAIT_S)
    return "started"


@tool
async def abort_seen(key: str) -> str:
    """Why ``wait(key)`` was aborted (once it was)."""
    await asyncio.wait_for(_event(f"aborted:{key}").wait(), WAIT_S)
    return _reasons[key]


counter = define_environment(
    "counter", create=lambda config: {"n": 0}, close=lambda state: CLOSED.append(dict(state))
)


@tool(environment="counter")
def bump(*, ctx: ToolRunContext) -> int:
    """Add one to this scope's counter."""
    ctx.environment["n"] += 1
    return int(ctx.environment["n"])


def _scoped(name: str) -> Any:
    def body() -> str:
        return f"{name} ran"

    body.__name__ = name
    body.__doc__ = f"The {name} tool."
    return tool(body)


def build() -> ToolRegistry:
    registry = ToolRegistry()
    for definition in (add, whoami, crash, slow, wait, wait_started, abort_seen, bump):
        registry.register(definition)
    registry.register_environment(counter)
    registry.scope("a").register(_scoped("a_only"))
    registry.scope("b").register(_scoped("b_only"))
    registry.scope("org/team", parent="org").register(_scoped("team_only"))
    TimeoutPolicy().install(registry)
    return registry
