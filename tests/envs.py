"""Environments and their tools shared by the core, Ray and contract tests.

Pickled by value into Ray actors (like ``tests/tools.py``), so every body here runs
unchanged in a worker or an instance's process. Two worlds:

- ``counter``: ``{"n": int, "log": [int, ...]}`` — ``incr`` (exclusive), ``peek``
  (concurrency-safe), ``incr_twice`` (nests two ``incr`` calls into the same instance);
- ``fs``: a small file system ``{"files": {path: text}}`` opened with
  ``{"files": {...}}`` — ``fs_write``, ``fs_read``, ``fs_ls``.

Plus bodies that end their instance's process (``crash``: ``os._exit``) or hang past
their deadline (``hang``), and environments whose ``create`` raises or whose state does
not snapshot.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from toolray import (
    EnvironmentDefinition,
    ToolDefinition,
    ToolRunContext,
    define_environment,
    thaw_json,
    tool,
)


def make_counter(config: Any) -> dict[str, Any]:
    """A counter starting at ``config["start"]`` (0 without a config)."""
    start = 0 if config is None else int(config.get("start", 0))
    return {"n": start, "log": [], "pid": os.getpid()}


def make_fs(config: Any) -> dict[str, Any]:
    """A file system holding ``config["files"]``."""
    files = {} if config is None else dict(config.get("files", {}))
    return {"files": files, "pid": os.getpid()}


closed: list[Any] = []
"""States whose ``close`` ran in this process (in-process tests read it)."""


def close_state(state: Any) -> None:
    """Record the close (and, for a state that says where, write a marker file)."""
    closed.append(state)
    marker = state.get("close_marker") if isinstance(state, dict) else None
    if marker:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(f"{state.get('n', '')}\n")


def counter_env(**options: Any) -> EnvironmentDefinition:
    """The ``counter`` environment (``options`` override the definition's keywords)."""
    kw: dict[str, Any] = {"create": make_counter, "close": close_state}
    kw.update(options)
    return define_environment("counter", **kw)


def fs_env(**options: Any) -> EnvironmentDefinition:
    """The ``fs`` environment."""
    kw: dict[str, Any] = {"create": make_fs, "close": close_state}
    kw.update(options)
    return define_environment("fs", **kw)


@tool(environment="counter")
def incr(by: int, *, ctx: ToolRunContext) -> int:
    """Add ``by`` to the counter; the new value."""
    state = ctx.environment
    value = state["n"]
    time.sleep(0)  # a read-modify-write that a concurrent increment would break
    state["n"] = value + by
    state["log"].append(by)
    return int(state["n"])


@tool(environment="counter", concurrency_safe=True)
def peek(*, ctx: ToolRunContext) -> int:
    """The counter's value."""
    return int(ctx.environment["n"])


@tool(environment="counter")
async def incr_twice(by: int, *, ctx: ToolRunContext) -> list[int]:
    """Two nested ``incr`` calls into this very instance (inside this call's turn)."""
    first = await ctx.dispatch("incr", {"by": by})
    second = await ctx.dispatch("incr", {"by": by})
    return [first.value, second.value]  # type: ignore[union-attr]


@tool(environment="counter")
def where(*, ctx: ToolRunContext) -> dict[str, Any]:
    """The pids of this body's process and of the process that created the state."""
    return {"body": os.getpid(), "state": int(ctx.environment["pid"])}


@tool(environment="counter")
def crash(*, ctx: ToolRunContext) -> int:
    """End the instance's process, as a segfaulting extension would."""
    os._exit(3)


@tool(environment="counter", timeout_ms=300)
def hang(*, ctx: ToolRunContext) -> int:
    """Ignore every signal past the deadline."""
    while True:
        time.sleep(3600)


@tool(environment="counter")
def spawn(daemon: bool = False, *, ctx: ToolRunContext) -> int:
    """Start a helper process beside the instance (a shell session, say); its pid.

    With ``daemon`` it double-forks out of the instance's group and session.
    """
    import subprocess

    if not daemon:
        return subprocess.Popen(["sleep", "600"]).pid
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, str(os.getpid()).encode())
            os.execvp("sleep", ["sleep", "600"])
        os._exit(0)
    return int(os.read(read_end, 64))


@tool(environment="fs")
def fs_write(path: str, text: str, *, ctx: ToolRunContext) -> int:
    """Write ``text`` at ``path``; the number of files."""
    ctx.environment["files"][path] = text
    return len(ctx.environment["files"])


@tool(environment="fs", concurrency_safe=True)
def fs_read(path: str, *, ctx: ToolRunContext) -> str:
    """The text at ``path`` (an error if there is none)."""
    files = ctx.environment["files"]
    if path not in files:
        raise FileNotFoundError(path)
    return str(files[path])


@tool(environment="fs", concurrency_safe=True)
def fs_ls(*, ctx: ToolRunContext) -> list[str]:
    """Every path, sorted."""
    return sorted(ctx.environment["files"])


def remember_define_tool_args() -> ToolDefinition:
    """A ``define_tool`` body that keeps (thawed) arguments in its state."""
    from toolray import ToolOutput, define_tool, text_block

    def body(args: Any, ctx: ToolRunContext) -> int:
        ctx.environment.setdefault("tags", []).extend(thaw_json(args["tags"]))
        kept = ctx.environment.setdefault("kept", thaw_json(args))
        kept["tags"].append("seen")  # a deep-frozen argument would refuse this
        return len(ctx.environment["tags"])

    return define_tool(
        name="remember",
        description="Keep the tags",
        parameters={"tags": {"type": "array", "items": {"type": "string"}, "required": True}},
        output=ToolOutput(schema={"type": "integer"}, render=lambda a, v: [text_block(str(v))]),
        execute=body,
        environment="counter",
    )


def failing_env() -> EnvironmentDefinition:
    """An environment whose ``create`` raises."""

    def create(config: Any) -> Any:
        raise RuntimeError(f"no such task: {config}")

    return define_environment("broken", create=create)


def unsnapshottable_env(park_after_s: float = 60.0) -> EnvironmentDefinition:
    """A ``counter`` whose state holds a lock (it never snapshots, so never parks)."""

    def create(config: Any) -> Any:
        return {"n": 0, "log": [], "pid": os.getpid(), "lock": threading.Lock()}

    return define_environment("counter", create=create, park_after_s=park_after_s)


COUNTER_TOOLS = (incr, peek, incr_twice, where, crash, hang)
FS_TOOLS = (fs_write, fs_read, fs_ls)


def copy_counter(state: dict[str, Any]) -> dict[str, Any]:
    """A counter's fork by the definition's own callable."""
    return {**state, "log": list(state["log"]), "copied": True}


def mark_close(state: dict[str, Any], path: str) -> None:
    """Make the state's ``close`` write its counter to ``path`` (a test's marker file)."""
    state["close_marker"] = path


@tool(environment="broken")
def use_broken() -> int:
    """A tool of the environment whose ``create`` raises."""
    return 1


@tool(environment="nowhere")
def use_nowhere() -> int:
    """A tool of an environment nobody registered."""
    return 1
