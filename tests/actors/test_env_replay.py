"""A stateful multi-turn replay on Ray matches plain Python and in-process toolray exactly.

Trajectories (scopes) open three environments (a file system, a ticket desk, a trading
account) with their own configs and play seeded turns, several scopes' batches at once; a
quarter of them fork half-way into a branch that plays on. Every call's outcome and every
final state must equal the plain replay's (``toolray_actors.bench._env_replay``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray import ToolRegistry
from toolray_actors.bench._env_replay import make_plan, replay_plain, replay_toolray
from toolray_actors.bench._env_world import definitions

pytestmark = pytest.mark.ray


def _register(registry: Any, owned: list[Any]) -> None:
    environments, tools = definitions()
    owned.extend(registry.register_environment(e) for e in environments)
    owned.extend(registry.register(t) for t in tools)


def test_a_replay_matches_plain_python_in_process_and_on_sharded_ray(
    sharded_runtime: Any,
) -> None:
    plan = make_plan(16, 5, seed=11, prefix="replay")
    outcomes, states = replay_plain(plan)
    assert plan.forks
    assert any(o[0] == "error" for o in outcomes)  # bad calls are part of the world too

    local = ToolRegistry()
    _register(local, [])
    here = asyncio.run(
        replay_toolray(plan, local.execute_batch, lambda s, e: local.environment(e, scope=s))
    )
    assert here == (outcomes, states)

    owned: list[Any] = []
    _register(sharded_runtime.registry, owned)
    try:
        on_ray = asyncio.run(
            replay_toolray(
                plan,
                lambda b: sharded_runtime.executor(b.scope).execute_batch(b),
                lambda s, e: sharded_runtime.registry.environment(e, scope=s),
            )
        )
    finally:
        for dispose in reversed(owned):
            dispose()
    assert on_ray[0] == outcomes
    assert on_ray[1] == states
