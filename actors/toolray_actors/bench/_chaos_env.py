"""The chaos campaign's environments: every agent keeps a tally the faults must not reset.

Each agent opens its own ``tally`` instance (its state a count and a generation drawn when
it is created) and, after each ledger batch, bumps it with one call. The instance parks
when idle (every few seconds here), restores on its next call, and is forked now and then
into a branch that must start where the agent's tally stood. Faults take instances along —
a killed instance process (kind ``instance``), worker, executor or node — and the agent
must hear of each loss (``ENVIRONMENT_LOST`` or its call's own fault code), then re-open.

Invariants (:func:`check_env`, 0 where they held): no *silent reset* (a success from a new
generation the agent never opened), no *lost update* (a count that is not the last plus one
with no failure between, or that went back), no fork that started elsewhere, no code
outside the faults a loss may show.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import TYPE_CHECKING, TypedDict, cast

from toolray import (
    AbortController,
    EnvironmentDefinition,
    EnvironmentHandle,
    Placement,
    ToolBatchInput,
    ToolCall,
    ToolDefinition,
    ToolExecutionResult,
    ToolRunContext,
    define_environment,
    tool,
)

if TYPE_CHECKING:
    from toolray_actors.driver._runtime import RayRuntime

__all__ = ("ENV_CODES", "Tally", "check_env", "env_held", "tally_kit")

ENV_CODES = {"ENVIRONMENT_LOST", "WORKER_LOST", "EXECUTOR_LOST", "TOOL_TIMEOUT", "ABORTED"}
"""The codes a tally call may fail with under the campaign's faults."""

_PARK_AFTER_S = 3.0
_FORK_EVERY = 7
"""One tally step in this many forks a branch too."""


class Count(TypedDict):
    """A tally's state after a bump (what ``tally_bump`` answers)."""

    count: int
    gen: str


Seen = dict[str, object]
"""What one tally step saw, as the driver records it."""


def _create(config: dict[str, str] | None) -> dict[str, object]:
    return {"count": 0, "gen": secrets.token_hex(6), "agent": (config or {}).get("agent")}


@tool(name="tally_bump", environment="tally")
def _bump(*, ctx: ToolRunContext) -> dict[str, object]:
    """Count one step of the agent's trajectory."""
    state = ctx.environment
    state["count"] += 1
    return {"count": state["count"], "gen": state["gen"]}


def tally_kit(boxed: bool) -> tuple[EnvironmentDefinition, ToolDefinition]:
    """The environment and its tool (on a ``"call"`` pool when the tools are sandboxed)."""
    placement = Placement(isolation="call") if boxed else None
    env = define_environment(
        "tally", create=_create, park_after_s=_PARK_AFTER_S, placement=placement
    )
    return env, _bump


def _code(result: ToolExecutionResult) -> str | None:
    if not result.is_error:
        return None
    return str(result.error.info.code) if result.error.info else "NO_CODE"


class Tally:
    """One agent's view of its tally: what it expects next, and what it saw."""

    def __init__(self, rt: RayRuntime, scope: str) -> None:
        self.rt, self.scope = rt, scope
        self.branch = f"{scope}/branch"
        self.gen: str | None = None
        self.count = 0
        self.exact = True  # no failure since the last success: the next count is known
        self.steps = 0

    async def step(self) -> Seen:
        """Bump once (and now and then fork a branch); what happened, for the record."""
        self.steps += 1
        handle = self.rt.executor(self.scope).environment("tally")
        seen: Seen = {}
        try:
            if self.steps == 1:
                await handle.open({"agent": self.scope})
                seen["opened"] = True
            batch = ToolBatchInput(
                [ToolCall(f"{self.scope}-t{self.steps}", "tally_bump", {})],
                AbortController().signal,
                scope=self.scope,
            )
            (item,) = (await self.rt.executor(self.scope).execute_batch(batch)).results
            seen.update(self._judge(item.result))
            if seen.get("ok") and self.steps % _FORK_EVERY == 0:
                seen.update(await self._fork(handle))
            if "code" in seen:
                seen.update(await self._recover(handle))
        except Exception as err:  # a handle verb failed with its own fault: known, go on
            self.exact = False
            seen["raised"] = f"{type(err).__name__}: {str(err)[:200]}"
        return seen

    def _judge(self, result: ToolExecutionResult) -> Seen:
        if result.is_error:
            self.exact = False
            return {"code": _code(result)}
        value, verdict = cast("Count", result.value), "ok"
        if self.gen is not None and value["gen"] != self.gen:
            verdict = "silent_reset"  # a state the agent never opened answered
        elif self.gen is not None and (
            value["count"] <= self.count or (self.exact and value["count"] != self.count + 1)
        ):
            verdict = "lost_update"
        elif self.gen is None and value["count"] != 1:
            verdict = "lost_update"  # a fresh instance starts at 0
        self.gen, self.count, self.exact = value["gen"], value["count"], True
        return {"ok": verdict == "ok", "verdict": verdict, "count": value["count"]}

    async def _fork(self, handle: EnvironmentHandle) -> Seen:
        branch = await handle.fork(self.branch)  # one branch scope per agent, reused
        try:
            batch = ToolBatchInput(
                [ToolCall(f"{self.branch}-t{self.steps}", "tally_bump", {})],
                AbortController().signal,
                scope=self.branch,
            )
            (item,) = (await self.rt.executor(self.branch).execute_batch(batch)).results
            outcome = item.result
            if outcome.is_error:
                return {"fork_code": _code(outcome)}
            value = cast("Count", outcome.value)
            right = value["gen"] == self.gen and value["count"] == self.count + 1
            return {"fork": "ok" if right else "wrong"}
        finally:
            await branch.close()

    async def _recover(self, handle: EnvironmentHandle) -> Seen:
        """After a failed bump: a lost instance is opened again (a new generation)."""
        status = await handle.status()
        if status.state != "lost":
            return {"state": status.state}
        await handle.open({"agent": self.scope})
        self.gen, self.count, self.exact = None, 0, True
        return {"state": "lost", "reopened": True}


def check_env(records: list[dict[str, object]]) -> dict[str, object]:
    """The environments' invariants over every record's ``tally`` (0 where they held).

    ``env_recovered``: agents whose last step (after the faults stopped) bumped fine.
    """
    seen = [cast("Seen", r["tally"]) for r in records if "tally" in r]
    codes = [s["code"] for s in seen if "code" in s] + [
        s["fork_code"] for s in seen if "fork_code" in s
    ]
    last: dict[object, bool] = {}
    for r in records:
        if "tally" in r:
            last[r["agent"]] = bool(cast("Seen", r["tally"]).get("ok"))
    return {
        "env_agents": len(last),
        "env_recovered": sum(last.values()),
        "env_steps": len(seen),
        "env_ok": sum(1 for s in seen if s.get("ok")),
        "env_failed": len(codes),
        "env_reopened": sum(1 for s in seen if s.get("reopened")),
        "env_forks": sum(1 for s in seen if "fork" in s),
        "env_silent_resets": sum(1 for s in seen if s.get("verdict") == "silent_reset"),
        "env_lost_updates": sum(1 for s in seen if s.get("verdict") == "lost_update"),
        "env_forks_wrong": sum(1 for s in seen if s.get("fork") == "wrong"),
        "env_unexpected_codes": sum(1 for c in codes if c not in ENV_CODES),
    }


def env_held(out: Mapping[str, object]) -> bool:
    """Whether every environment invariant held (the tallies ran, and every agent's last)."""
    zero = ("env_silent_resets", "env_lost_updates", "env_forks_wrong", "env_unexpected_codes")
    ran = out.get("env_ok") != 0 and out.get("env_recovered") == out.get("env_agents")
    return ran and all(out.get(k) == 0 for k in zero)
