"""Which worker pool runs a tool: a stable key per placement, and the pool's actor options.

Tools with equal placements share one pool. The key is a digest every process computes
alike (not ``hash()``, which differs per process) and covers ``runtime_env`` and
``isolation`` too, so two tools whose placements differ only there never share workers.

Isolation: the placement's own ``isolation``, else the pool table's when it sets one, else
``"call"`` — except a GPU pool (``num_gpus > 0``), which runs ``"shared"`` with one call at
a time per worker unless told otherwise (a GPU context does not survive a fork).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

from ._config import PoolConfig, RuntimeConfig

__all__ = ("Isolation", "PoolPlan", "WorkerSettings", "placement_key", "pool_plan")


_FIELDS = (
    "num_cpus",
    "num_gpus",
    "resources",
    "runtime_env",
    "size",
    "spare",
    "max_concurrency",
    "isolation",
    "pool",
)
_ELASTIC = ("min_size", "max_size", "idle_s")
_DEFAULTS: dict[str, object] = {
    "reuse": "tool",
    "read_paths": (),
    "write_paths": (),
    "network": False,
}
"""Fields in the key only when not at their default (keys of older placements unchanged)."""


def placement_key(placement: Any) -> str:
    """``"default"``, ``"named-<pool>"`` for a bare named pool, or ``"p-<digest>"``.

    The digest covers every field (``runtime_env`` and the pool sizing included), as
    canonical JSON, so every process computes the same key for equal placements.
    """
    if placement is None:
        return "default"
    fields = {name: getattr(placement, name, None) for name in _FIELDS}
    for extra in _ELASTIC:  # only when set: the keys of fixed pools stay as they were
        if getattr(placement, extra, None) is not None:
            fields[extra] = getattr(placement, extra)
    for extra, default in _DEFAULTS.items():
        if getattr(placement, extra, default) != default:
            fields[extra] = getattr(placement, extra)
    name = fields.pop("pool")
    if name and not any(v is not None for v in fields.values()):
        return f"named-{name}"
    fields["pool"] = name
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=repr)
    return "p-" + hashlib.sha256(text.encode()).hexdigest()[:16]


Isolation = Literal["call", "shared", "sandbox"]
PROCESS_ISOLATION: tuple[Isolation, ...] = ("call", "sandbox")
"""The isolations whose bodies run in call processes (the worker kills a call's process)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerSettings:
    """What a worker actor is told when it starts: how it runs bodies."""

    threads: int = 64
    """Threads for sync bodies (``max_concurrency``)."""
    isolation: Isolation = "call"
    memory_mb: int = 4096
    """``"call"``: how much a call's process may allocate beyond its template."""
    warm_children: int = 2
    """``"call"``: idle call processes kept forked ahead of demand."""
    max_bodies: int | None = None
    """Bodies at once (default ``body_limit(threads)``; 1 for a default GPU pool)."""
    reuse: Literal["tool", "never"] = "tool"
    """``"call"``: a process takes later calls of its own tool only, or none at all."""
    read_paths: tuple[str, ...] = ()
    """``"sandbox"``: what a body may read besides what Python and the tools' code need."""
    write_paths: tuple[str, ...] = ()
    """``"sandbox"``: where a body may write besides its scratch directory."""
    network: bool = False
    """``"sandbox"``: whether a body may use the network."""
    confinement: Literal["auto", "strict"] = "auto"
    """``"sandbox"``: ``"strict"`` refuses calls where a layer of the sandbox is missing."""
    call_processes: int | None = None
    """``"call"``: call processes at once (default: ``max_bodies``'s, or derived)."""
    derive_processes: bool = False
    """``"call"``: derive the call-process limit from the worker's node (CPUs, memory),
    never below ``max_bodies``'s."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolPlan:
    """How to build one pool: sizes, the worker actors' options and their settings."""

    key: str
    size: int
    spare: int
    max_concurrency: int
    options: dict[str, Any]
    worker: WorkerSettings = WorkerSettings()
    min_size: int = 0
    """The fewest workers (0: ``size``, a fixed pool)."""
    max_size: int = 0
    """The most workers (0: ``size``, a fixed pool)."""
    idle_s: float = 60.0
    """How long a worker of an elastic pool may stay idle before it is retired."""
    max_queue_ms: float | None = None
    """How long a call may wait for capacity before it fails ``OVERLOADED`` (no bound)."""

    @property
    def isolation(self) -> Isolation:
        """How far a body's fault reaches in this pool."""
        return self.worker.isolation

    @property
    def elastic(self) -> bool:
        """Whether the pool grows and shrinks (``max_size > min_size``)."""
        return self.max_size > self.min_size


def pool_plan(placement: Any, config: RuntimeConfig) -> PoolPlan:
    """The plan of ``placement``'s pool.

    A named pool takes its ``[pools.<name>]`` table; otherwise the default pool's settings,
    overridden by the placement's own fields. A special placement keeps one worker and no
    spare unless it says otherwise (``num_gpus=1`` must not ask for three GPUs), and a GPU
    pool keeps no spare unless ``spare`` is set. ``min_size`` and ``max_size`` default to
    ``size`` (a fixed pool); an elastic pool starts with ``size`` clamped between them.
    """
    key = placement_key(placement)
    base: PoolConfig = config.pool
    name = getattr(placement, "pool", None) if placement is not None else None
    if name:
        if str(name) not in config.pools:
            known = ", ".join(sorted(config.pools)) or "(none)"
            raise ValueError(
                f'placement names pool "{name}", but the runtime config has no [pools.{name}] '
                f"table (configured pools: {known})"
            )
        base = config.pools[str(name)]
    options: dict[str, Any] = {"num_cpus": base.num_cpus}
    if base.resources:
        options["resources"] = dict(base.resources)
    if base.runtime_env:
        options["runtime_env"] = base.runtime_env
    size, spare, conc = base.size, base.spare, base.max_concurrency
    if placement is not None:
        for attr in ("num_cpus", "num_gpus", "resources", "runtime_env"):
            value = getattr(placement, attr, None)
            if value is not None:
                options[attr] = value
        own_size = getattr(placement, "size", None)
        own_spare = getattr(placement, "spare", None)
        special = key != "default" and not name
        size = own_size if own_size is not None else (1 if special else size)
        spare = own_spare if own_spare is not None else (0 if special else spare)
        conc = getattr(placement, "max_concurrency", None) or conc
        if own_spare is None and options.get("num_gpus") and "spare" not in base.model_fields_set:
            spare = 0  # a GPU pool keeps no spare unless asked
    isolation, one_at_a_time = _isolation(placement, base, options)
    if one_at_a_time:
        conc = 1
    worker = WorkerSettings(
        threads=conc,
        isolation=isolation,
        memory_mb=base.memory_mb,
        warm_children=base.warm_children,
        max_bodies=1 if one_at_a_time else None,
        reuse=_own(placement, "reuse", "tool"),
        read_paths=tuple(_own(placement, "read_paths", ())),
        write_paths=tuple(_own(placement, "write_paths", ())),
        network=bool(_own(placement, "network", False)),
        confinement=base.confinement,
        call_processes=base.max_call_processes,
        derive_processes=base.max_call_processes is None,
    )
    low = _own(placement, "min_size", base.min_size)
    high = _own(placement, "max_size", base.max_size)
    low, high = (low or size), (high or size)
    low = min(low, high)
    return PoolPlan(
        key=key,
        size=max(low, min(size, high)),
        spare=spare,
        max_concurrency=conc,
        options=options,
        worker=worker,
        min_size=low,
        max_size=high,
        idle_s=float(_own(placement, "idle_s", base.idle_s)),
        max_queue_ms=base.max_queue_ms,
    )


def _own(placement: Any, field: str, default: Any) -> Any:
    value = getattr(placement, field, None) if placement is not None else None
    return value if value is not None else default


def _isolation(placement: Any, base: PoolConfig, options: dict[str, Any]) -> tuple[Isolation, bool]:
    """The pool's isolation, and whether its workers run one call at a time.

    A GPU pool that sets neither isolation nor concurrency is shared, one call at a time.
    """
    own: Isolation | None = getattr(placement, "isolation", None) if placement else None
    if own is not None:
        return own, False
    if "isolation" in base.model_fields_set or not options.get("num_gpus"):
        return base.isolation, False
    own_conc = getattr(placement, "max_concurrency", None) if placement else None
    one = own_conc is None and "max_concurrency" not in base.model_fields_set
    return "shared", one
