"""The ``[pool]`` / ``[pools.<name>]`` and ``[rate_limits.<tool>]`` tables of ``RuntimeConfig``.

Like every key of the runtime configuration, each carries a ``description``: the
configuration reference of the docs is generated from them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ("PoolConfig", "RateLimitConfig", "Strict")


class Strict(BaseModel):
    """Unknown keys are errors; a loaded configuration is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolConfig(Strict):
    """The worker pool: its size, per-worker concurrency, isolation and actor options."""

    size: int = Field(
        default=2,
        ge=1,
        le=256,
        description="Worker actors the pool keeps running (tool bodies run on them).",
    )
    max_concurrency: int = Field(
        default=64,
        ge=1,
        description="Tool bodies one worker actor runs at once (threads or asyncio tasks; with "
        'isolation = "call", each in its own call process, see max_call_processes).',
    )
    num_cpus: float = Field(
        default=0,
        ge=0,
        description="CPUs Ray reserves for each worker actor (0: workers are placed "
        "anywhere, even on a node whose CPUs are all taken).",
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom Ray resources each worker actor needs, e.g. "
        "{ toolslot = 1 } to keep workers on the nodes started with --resources.",
    )
    runtime_env: dict[str, Any] | None = Field(
        default=None,
        description="A Ray runtime_env for the worker actors only (pip, env_vars, "
        "working_dir, py_modules...), merged over the job's [ray] runtime_env.",
    )
    spare: int = Field(
        default=1,
        ge=0,
        le=8,
        description="Warm spare workers kept started: a killed or crashed worker is "
        "replaced by a spare at once, not after an actor start.",
    )
    isolation: Literal["call", "shared", "sandbox"] = Field(
        default="call",
        description='How far a tool body\'s fault reaches. "call": each call runs alone in a '
        "child process of the worker (forked from a warm template holding the tools' code), "
        "so a crash, a memory blow-up or a kill at the deadline fails that call only. "
        '"sandbox": each call in a fresh process confined like a Code Mode program (its own '
        "user, pid, mount, ipc and network namespaces, Landlock, a syscall filter; never "
        "reused), seeing only the paths and network its placement grants. "
        '"shared": bodies run as threads and tasks of the worker itself (fastest; a fault '
        "fails every call in that worker). A pool with GPUs (num_gpus > 0) that does not set "
        'it explicitly runs "shared", one call at a time per worker.',
    )
    confinement: Literal["auto", "strict"] = Field(
        default="auto",
        description='With isolation = "sandbox": "auto" uses every layer this host offers; '
        '"strict" refuses to run a call where a layer is missing (the call fails, naming '
        "each missing layer and why). RayRuntime.confinement() reports the layers.",
    )
    memory_mb: int = Field(
        default=4096,
        ge=16,
        description='With isolation = "call": how much memory one call\'s process may allocate '
        "beyond the template it was forked from (an rlimit on its data segment). A body that "
        "allocates past it fails its own call with WORKER_LOST; the worker lives on.",
    )
    warm_children: int = Field(
        default=2,
        ge=0,
        le=64,
        description='With isolation = "call": idle call processes each worker keeps forked '
        "ahead of demand (more are forked when calls wait; idle extras exit after a while).",
    )
    max_call_processes: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description='With isolation = "call": the most call processes one worker runs at once '
        "(more are forked while calls wait for one and bodies run long, as I/O-bound bodies "
        "do). Unset: derived from the worker's node, min(64 per CPU, available memory / 32 "
        "MiB, 1024), and never below max_concurrency + 8.",
    )
    max_queue_ms: float | None = Field(
        default=None,
        gt=0,
        description="How long a call may wait for capacity in this pool (a worker with room, "
        "a call process, a body slot) before it fails OVERLOADED without running (fault "
        '"infra"). Unset: no bound (a batch\'s deadline_s still bounds the wait). Waiting is '
        "never counted against a tool's timeout_ms, which is its body's budget.",
    )
    min_size: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Elastic pools: the fewest workers kept (unset: size). Workers idle "
        "for idle_s are retired down to it.",
    )
    max_size: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Elastic pools: the most workers (unset: size). While calls wait for a "
        "worker, the pool adds one, up to max_size.",
    )
    idle_s: float = Field(
        default=60,
        gt=0,
        description="Elastic pools: a worker with no call for this many seconds is retired "
        "(never below min_size).",
    )


class RateLimitConfig(Strict):
    """A ``[rate_limits.<tool>]`` table: the tool's rate limit for the whole namespace."""

    per_second: float = Field(
        gt=0, description="Tokens per second: how many of the tool's calls may start per second."
    )
    burst: int = Field(
        default=1,
        ge=1,
        description="Tokens the bucket holds (it starts full): calls that may start at once.",
    )
    max_wait_ms: float | None = Field(
        default=None,
        ge=0,
        description="How long a call may wait for a token before it fails RATE_LIMITED "
        "(unset: as long as it takes).",
    )
