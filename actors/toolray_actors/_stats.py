"""Runtime statistics: one record per live actor, and the runtime-wide snapshot."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import psutil

__all__ = ("ActorKind", "ActorStats", "PoolStats", "RuntimeStats", "actor_stats")

ActorKind = Literal["registry", "executor", "pool", "worker", "code", "bucket"]


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
class PoolStats:
    """A snapshot of one pool."""

    workers: int
    spares: int
    kills: int
    deaths: int
    replacements: int
    version: int
    name: str = ""
    size: int = 0
    """Workers the pool holds now (members and workers still starting)."""
    min_size: int = 0
    max_size: int = 0
    grown: int = 0
    """Workers an elastic pool added because calls waited."""
    retired: int = 0
    """Workers an elastic pool retired because they were idle."""


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
    pools: tuple[PoolStats, ...] = ()
    """One record per pool (its ``name``, current ``size``, ``min_size`` / ``max_size``)."""


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
