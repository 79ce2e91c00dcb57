"""Runtime statistics: one record per live actor, and the runtime-wide snapshot."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import psutil

from ._farm_stats import ToolStats

__all__ = ("ActorKind", "ActorStats", "RuntimeStats", "ToolStats", "actor_stats")

ActorKind = Literal["registry", "executor", "pool", "worker", "code"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActorStats:
    """One live actor of the namespace: what it is, where it runs, what it costs."""

    kind: ActorKind
    name: str
    pid: int
    node_id: str
    rss_bytes: int
    scopes: int
    """Scopes it serves: the registry's known scopes, an executor's hosted scopes, else 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeStats:
    """Workers, in-flight calls, kills and restarts across the namespace, and every actor."""

    workers: int
    spares: int
    in_flight: int
    kills: int
    workers_lost: int
    replacements: int
    registry_restarts: int
    executors: tuple[str, ...]
    actors: tuple[ActorStats, ...] = ()
    tools: tuple[ToolStats, ...] = ()
    """Per tool over the namespace's executors, by name (merged latency sketches)."""


def _node_id() -> str:
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:
        return ""


def actor_stats(kind: ActorKind, name: str, scopes: int) -> ActorStats:
    """The calling actor's own record."""
    return ActorStats(
        kind=kind,
        name=name,
        pid=os.getpid(),
        node_id=_node_id(),
        rss_bytes=psutil.Process().memory_info().rss,
        scopes=scopes,
    )
