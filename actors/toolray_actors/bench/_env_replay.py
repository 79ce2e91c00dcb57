"""A stateful multi-turn replay through plain Python, in-process toolray and Ray, compared.

The same seeded calls each way, compared exactly: every call's outcome, every final state.

Each scope (a trajectory) opens the three environments of ``_env_world`` with its own
config, then plays turns: a batch of a few calls per turn, several scopes' batches at once.
At fixed turns a trajectory forks (GRPO-style branching) into a new scope that plays on from
the copy. The plain replay calls the same methods on ordinary objects, one by one in model
order, and copies a forked trajectory's objects with ``copy.deepcopy``.
"""

from __future__ import annotations

import asyncio
import copy
import json
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeAlias, cast

from toolray import (
    EnvironmentHandle,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolExecutionFailure,
    ToolExecutionResult,
    thaw_json,
)

from ._env_world import API, state_of

__all__ = ("Plan", "make_plan", "replay_plain", "replay_toolray")


def _file(r: random.Random) -> str:
    return f"d{r.randint(0, 2)}/f{r.randint(0, 3)}"


def _ticket(r: random.Random) -> str:
    return f"T{r.randint(1, 6)}"


Args: TypeAlias = dict[str, object]
Batch: TypeAlias = list[tuple[str, Args]]
Outcome: TypeAlias = list[object]
States: TypeAlias = dict[str, dict[str, object]]
"""Per scope, each environment's final state (plain JSON)."""

_CALLS: dict[str, list[tuple[str, Callable[[random.Random], Args]]]] = {
    "fs": [
        ("write", lambda r: {"name": _file(r), "text": r.choice("abc")}),
        ("append", lambda r: {"name": _file(r), "text": r.choice("xyz")}),
        ("cat", lambda r: {"name": _file(r)}),
        ("cd", lambda r: {"path": r.choice(["/", "/d0", "/d1", "d2", "/nowhere"])}),
        ("ls", lambda r: {}),
    ],
    "desk": [
        ("open_ticket", lambda r: {"title": r.choice(["a", "b"]), "priority": r.randint(1, 3)}),
        ("comment", lambda r: {"key": _ticket(r), "note": r.choice(["seen", "fixed?"])}),
        ("close_ticket", lambda r: {"key": _ticket(r)}),
        ("open_tickets", lambda r: {}),
    ],
    "account": [
        (
            "buy",
            lambda r: {"symbol": r.choice(["ACME", "INITECH", "NOPE"]), "shares": r.randint(1, 9)},
        ),
        ("sell", lambda r: {"symbol": r.choice(["ACME", "INITECH"]), "shares": r.randint(1, 5)}),
        ("balance", lambda r: {}),
    ],
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The configs, turns and forks of one replay."""

    configs: dict[str, dict[str, Args]]
    """Per scope: each environment's config."""
    turns: list[dict[str, Batch]]
    """Per turn: each playing scope's batch (tool name, arguments)."""
    forks: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    """Before turn ``t``: ``(parent scope, child scope)`` branches (every environment)."""

    @property
    def calls(self) -> int:
        """How many calls the plan makes."""
        return sum(len(b) for turn in self.turns for b in turn.values())


def make_plan(scopes: int, turns: int, *, seed: int = 7, prefix: str = "traj") -> Plan:
    """A seeded plan: ``scopes`` trajectories of ``turns`` turns, a fork every 4th scope."""
    rng = random.Random(seed)
    names = [f"{prefix}-{i}" for i in range(scopes)]
    configs = {s: _config(rng) for s in names}
    forks: dict[int, list[tuple[str, str]]] = {}
    at = max(1, turns // 2)
    for i in range(0, scopes, 4):
        child = f"{names[i]}-branch"
        forks.setdefault(at, []).append((names[i], child))
    playing = list(names)
    plan_turns: list[dict[str, Batch]] = []
    for t in range(turns):
        playing += [child for _, child in forks.get(t, [])]
        plan_turns.append({s: _batch(rng) for s in playing})
    return Plan(configs=configs, turns=plan_turns, forks=forks)


def _config(rng: random.Random) -> dict[str, Args]:
    return {
        "fs": {"files": {f"/d{rng.randint(0, 2)}/seed": rng.choice(["one", "two"])}},
        "desk": {"first_id": 1},
        "account": {"cash": rng.choice([100, 500, 1000])},
    }


def _batch(rng: random.Random) -> Batch:
    calls: Batch = []
    for _ in range(rng.randint(1, 4)):
        env = rng.choice(list(_CALLS))
        method, args = rng.choice(_CALLS[env])
        calls.append((f"{env}_{method}", {"args": args(rng)}))
    return calls


def _plain_json(value: object) -> object:
    return json.loads(json.dumps(value))


# ------------------------------------------------------------------ the plain replay
def replay_plain(plan: Plan) -> tuple[list[Outcome], States]:
    """The reference: ``(every call's outcome in plan order, each scope's final states)``."""
    worlds = {s: {env: cls(plan.configs[s][env]) for env, cls in API.items()} for s in plan.configs}
    outcomes: list[Outcome] = []
    for t, turn in enumerate(plan.turns):
        for parent, child in plan.forks.get(t, []):
            worlds[child] = copy.deepcopy(worlds[parent])
        for scope, batch in turn.items():
            for name, arguments in batch:
                env, _, method = name.partition("_")
                try:
                    kwargs = cast("dict[str, object]", arguments["args"])
                    value = getattr(worlds[scope][env], method)(**kwargs)
                    outcomes.append(["ok", _plain_json(value)])
                except ValueError as err:
                    outcomes.append(["error", str(err)])
    states = {s: {env: _plain_json(state_of(o)) for env, o in w.items()} for s, w in worlds.items()}
    return outcomes, states


# ------------------------------------------------------------------ through toolray
Run = Callable[[ToolBatchInput], Awaitable[ToolBatchResult]]
Handle = Callable[[str, str], EnvironmentHandle]
"""``(scope, environment name)`` → an ``EnvironmentHandle``."""


async def replay_toolray(plan: Plan, run: Run, handle: Handle) -> tuple[list[Outcome], States]:
    """The same plan through a runtime: its batches (``run``) and handles (``handle``)."""
    await asyncio.gather(
        *(handle(s, env).open(cfg[env]) for s, cfg in plan.configs.items() for env in API)
    )
    outcomes: list[Outcome] = []
    for t, turn in enumerate(plan.turns):
        for parent, child in plan.forks.get(t, []):
            await asyncio.gather(*(handle(parent, env).fork(child) for env in API))
        results = await asyncio.gather(*(run(_input(s, b)) for s, b in turn.items()))
        for result in results:
            outcomes.extend(_outcome(r.result) for r in result.results)
    scopes = [*plan.configs, *(c for forks in plan.forks.values() for _, c in forks)]
    states: States = {}
    for scope in scopes:
        snaps = await asyncio.gather(*(handle(scope, env).snapshot() for env in API))
        states[scope] = {env: _plain_json(state_of(s)) for env, s in zip(API, snaps, strict=True)}
    await asyncio.gather(*(handle(s, env).close() for s in scopes for env in API))
    return outcomes, states


def _input(scope: str, batch: Sequence[tuple[str, Args]]) -> ToolBatchInput:
    calls = [ToolCall(f"{scope}-{i}", name, args) for i, (name, args) in enumerate(batch)]
    return ToolBatchInput(calls, scope=scope)


def _outcome(result: ToolExecutionResult) -> Outcome:
    if isinstance(result, ToolExecutionFailure):
        return ["error", result.error.message]
    return ["ok", _plain_json(thaw_json(result.value))]
