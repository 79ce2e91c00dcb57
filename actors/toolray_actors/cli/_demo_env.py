"""The environments scene of ``toolray demo``: a world per trajectory, forked, lost loudly.

Two trajectories of a coding task each open their own ``repo`` instance from the task's
config (each in a process of its own on a worker); one is forked into a branch that edits
apart; rewards are read where the states live; then a body crashes one instance's process:
that trajectory's next call says ``ENVIRONMENT_LOST`` while the other goes on, untouched,
and ``open()`` gives the lost one a fresh instance.
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from toolray import (
    AbortController,
    Disposer,
    EnvironmentDefinition,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolDefinition,
    ToolExecutionResult,
    ToolRunContext,
    define_environment,
    tool,
)

if TYPE_CHECKING:
    from toolray_actors.driver._runtime import RayRuntime

__all__ = ("env_kit", "env_scene")

TASK = {"files": {"calc.py": "def add(a, b):\n    return a - b\n"}}
"""The task every trajectory starts from: a one-line bug."""


class Repo(TypedDict):
    """An instance's state: the repository's files and how many edits it has seen."""

    files: dict[str, str]
    edits: int


def _repo(config: dict[str, dict[str, str]] | None) -> Repo:
    return {"files": dict((config or {}).get("files", {})), "edits": 0}


def reward(state: Repo) -> float:
    """1.0 once the bug is fixed (read where the state lives)."""
    return 1.0 if "return a + b" in state["files"].get("calc.py", "") else 0.0


@tool(name="repo_write", environment="repo")
def _write(path: str, text: str, *, ctx: ToolRunContext) -> str:
    """Write a file of the trajectory's repository."""
    ctx.environment["files"][path] = text
    ctx.environment["edits"] += 1
    return f"wrote {path} (edit {ctx.environment['edits']}, pid {os.getpid()})"


@tool(name="repo_crash", environment="repo")
def _crash(*, ctx: ToolRunContext) -> str:
    """End the instance's process (a segfaulting extension, say)."""
    os._exit(3)


def env_kit() -> tuple[EnvironmentDefinition, list[ToolDefinition]]:
    """The scene's environment and its tools."""
    return define_environment("repo", create=_repo), [_write, _crash]


def _batch(scope: str, *calls: tuple[str, dict[str, str]]) -> ToolBatchInput:
    made = [ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)]
    return ToolBatchInput(made, AbortController().signal, scope=scope)


def _first(batch: ToolBatchResult) -> str:
    first, *_ = batch.results
    return _outcome(first.result)


def _outcome(result: ToolExecutionResult) -> str:
    if result.is_error:
        return str(result.error.info.code if result.error.info else result.error.message)
    return str(result.value)


async def env_scene(rt: RayRuntime, disposers: list[Disposer], say: Callable[..., None]) -> None:
    """Scene 7: environments on Ray (what it registers joins ``disposers``)."""
    environment, tools = env_kit()
    disposers.append(rt.registry.register_environment(environment))
    disposers.extend(rt.registry.register(t) for t in tools)
    say("", "=== 7. environments: a world per trajectory")
    say(
        *textwrap.wrap(
            "two trajectories open their own `repo` instance from the task's config, each in a"
            " process of its own; one forks a branch; rewards are read where the states live;"
            " a crash loses one instance only, and says so.",
            width=96,
            initial_indent="    ",
            subsequent_indent="    ",
        )
    )
    handles = {s: rt.registry.environment("repo", scope=s) for s in ("traj-a", "traj-b")}
    for scope, handle in handles.items():
        status = await handle.open(TASK)
        say(f"  {scope}: opened ({status.state}), its process {status.pid}")
    fix = {"path": "calc.py", "text": "def add(a, b):\n    return a + b\n"}
    await rt.executor("traj-a").execute_batch(_batch("traj-a", ("repo_write", fix)))
    branch = await handles["traj-a"].fork("traj-a/branch")
    wrong = {"path": "calc.py", "text": "def add(a, b):\n    return b - a\n"}
    await rt.executor("traj-a/branch").execute_batch(_batch("traj-a/branch", ("repo_write", wrong)))
    rewards = [await h.run(reward) for h in (handles["traj-a"], branch, handles["traj-b"])]
    say(f"  rewards (traj-a, its branch, traj-b): {rewards}")
    crashed = await rt.executor("traj-b").execute_batch(_batch("traj-b", ("repo_crash", {})))
    again = await rt.executor("traj-b").execute_batch(_batch("traj-b", ("repo_write", fix)))
    other = await rt.executor("traj-a").execute_batch(_batch("traj-a", ("repo_write", fix)))
    say(f"  traj-b crashes its instance: {_first(crashed)}")
    say(f"  traj-b's next call: {_first(again)} (never re-created silently)")
    say(f"  traj-a meanwhile: {_first(other)}")
    await handles["traj-b"].open(TASK)
    counts = rt.stats().environments
    say(f"  traj-b opens again; instances open: {counts.open}, lost so far: {counts.losses}")
    for handle in (*handles.values(), branch):
        await handle.close()
