"""Runtime statistics: one record per live actor, and the runtime-wide snapshot."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

import psutil

from toolray.lowlevel import InstanceCounts

from ._farm_stats import ToolStats

__all__ = (
    "ActorKind",
    "ActorStats",
    "ChildStats",
    "PoolStats",
    "RuntimeStats",
    "ToolStats",
    "WorkerStatus",
    "actor_stats",
)

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
class ChildStats:
    """One worker's call processes (``isolation="call"``); counters since it started."""

    in_flight: int = 0
    """Calls this worker holds (running in a call process, or waiting for one)."""
    runs: int = 0
    live: int = 0
    """Call processes alive now (busy or idle)."""
    idle: int = 0
    forks: int = 0
    """Call processes forked from the template (warm ones, growth and replacements)."""
    kills: int = 0
    """Call processes killed by the cancellation ladder (a call that ignored its abort)."""
    deaths: int = 0
    """Call processes that died under their call (crash, signal, memory limit)."""
    retired: int = 0
    """Call processes ended by the worker: unclean after their call, or idle too long."""
    replacements: int = 0
    """Call processes forked to replace one that was killed, died or was retired."""
    descendants: int = 0
    """Processes bodies left behind (a subprocess never waited for, a double-forked
    daemon), killed when their call ended or their call process was killed."""
    pids: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStatus:
    """A snapshot of one worker."""

    pid: int
    in_flight: int
    runs: int
    cached_definitions: int
    isolation: str = "shared"
    children: ChildStats = ChildStats()
    idle_s: float = 0.0
    """Seconds since the worker last started or finished a call (0 while one runs, and
    while it holds environment instances)."""
    instances: int = 0
    """Environment instances it holds now."""
    instances_opened: int = 0
    instances_lost: int = 0
    instance_pids: tuple[int, ...] = ()
    """The processes holding its instances (``"call"`` isolation)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolStats:
    """A snapshot of one pool: its workers and their call processes.

    The call-process counters (``isolation="call"``) sum over every worker the pool has had.
    """

    name: str = ""
    isolation: str = "call"
    workers: int = 0
    spares: int = 0
    kills: int = 0
    """Worker actors killed by the ladder (``"shared"``: a call ignored its abort)."""
    deaths: int = 0
    replacements: int = 0
    """Worker actors replaced (promoted spares and new actors)."""
    version: int = 0
    child_kills: int = 0
    """Call processes killed by the ladder (``"call"``)."""
    child_deaths: int = 0
    """Call processes that died under their call (``"call"``)."""
    child_replacements: int = 0
    """Call processes forked to replace one that ended (``"call"``)."""
    child_descendants: int = 0
    """Processes bodies left behind, killed with their call (``"call"``)."""
    children: int = 0
    """Call processes alive now, across the pool's workers."""
    children_busy: int = 0
    """Call processes running a call now (or being killed)."""
    child_pids: tuple[int, ...] = ()
    """The pids of the call processes alive now."""
    size: int = 0
    """Workers the pool holds now (members and workers still starting)."""
    min_size: int = 0
    max_size: int = 0
    grown: int = 0
    """Workers an elastic pool added because calls waited."""
    retired: int = 0
    """Workers an elastic pool retired because they were idle."""
    instances: int = 0
    """Environment instances its workers hold now."""
    instance_pids: tuple[int, ...] = ()
    """The processes holding them (``"call"`` isolation)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeStats:
    """Workers, in-flight calls, kills and restarts across the namespace, and every actor.

    ``kills`` counts the ladder's last step in every mode (a worker actor with
    ``"shared"`` isolation, a call process with ``"call"``); ``child_kills`` and
    ``child_replacements`` count call processes only; ``pools`` has one record per pool.
    """

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
    child_kills: int = 0
    child_deaths: int = 0
    child_replacements: int = 0
    pools: tuple[PoolStats, ...] = ()
    """One record per pool (its ``name``, current ``size``, ``min_size`` / ``max_size``)."""
    environments: InstanceCounts = field(default_factory=InstanceCounts)
    """Environment instances by state over the namespace's executors (``open``,
    ``parked``, ``lost``), and their opens, parks, restores, forks and losses so far."""
    batches_in_flight: int = 0
    """This driver's batches on executor actors now (sent, not yet back)."""
    batches_waiting: int = 0
    """This driver's batches waiting to be sent: each executor actor holds at most
    ``[executors] max_batches_in_flight`` of a driver's batches (backpressure)."""
    batches_waited: int = 0
    """This driver's batches that had to wait so, since it connected."""


def _node_id() -> str:
    try:
        from ._remote import node_id

        return node_id()
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
