"""``RuntimeConfig``: how the Ray layer starts, sizes its pools and escalates cancellation.

Loaded from TOML, validated by pydantic; unknown keys are errors. Every key carries a
``description``: the configuration reference of the docs is generated from them.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from toolray.errors import ToolrayError

from ._config_pool import PoolConfig as PoolConfig
from ._config_pool import RateLimitConfig as RateLimitConfig
from ._config_pool import Strict as _Strict

__all__ = (
    "CodeConfig",
    "ConfigError",
    "ExecutorsConfig",
    "PoolConfig",
    "RateLimitConfig",
    "RayInitConfig",
    "RuntimeConfig",
    "config_file",
    "load_config",
)


class ConfigError(ToolrayError, ValueError):
    """A configuration file that cannot be read or does not validate."""


class ExecutorsConfig(_Strict):
    """How agent scopes map onto executor actors."""

    mode: Literal["per_scope", "sharded"] = Field(
        default="per_scope",
        description='"per_scope": one executor actor (a process) per agent scope. '
        '"sharded": a fixed number of executor actors per namespace, each hosting many '
        "scopes (for agent farms with many scopes).",
    )
    shards: int = Field(
        default=2,
        ge=1,
        le=1024,
        description='Executor actors per namespace in "sharded" mode (about one per core '
        "of the nodes that host the control actors); a scope's shard is a stable function "
        "of its key.",
    )
    max_batches_in_flight: int = Field(
        default=256,
        ge=0,
        description="Backpressure: at most this many of one driver's batches in flight on one "
        "executor actor; the next waits in the driver, in the order submitted, until one ends "
        "(rt.stats().batches_waiting counts them). 0: no bound.",
    )


class CodeConfig(_Strict):
    """Code Mode on Ray: the ``run_code`` runtime (``toolray.code.PythonRuntime``) and its pool.

    Every key but ``max_parallel_sub_calls`` and ``size`` is the runtime's argument of the
    same name, with the same default.
    """

    timeout_s: float | None = Field(
        default=30.0,
        gt=0,
        description="Wall-clock seconds a program may run once started (None: no limit).",
    )
    cpu_s: float | None = Field(
        default=10.0,
        gt=0,
        description="CPU seconds a program may use; past them it fails with kind timeout.",
    )
    memory_mb: int = Field(
        default=512, ge=16, description="The program process's address-space limit, in MiB."
    )
    scratch_mb: int = Field(
        default=64,
        ge=1,
        description="Size of the program's scratch directory (its working directory, shared "
        "with /dev/shm), in MiB; also the largest file it may write.",
    )
    allowed_imports: tuple[str, ...] | None = Field(
        default=None,
        description="Top-level modules a program may import (None: the default allow-list).",
    )
    read_paths: tuple[str, ...] = Field(
        default=(),
        description="Absolute paths a program may also read (read-only), on every node.",
    )
    confinement: Literal["auto", "strict", "off"] = Field(
        default="auto",
        description='"auto": every confinement layer the host offers (the rest reported); '
        '"strict": all of them or the runtime does not start; "off": limits and the '
        "syscall filter only.",
    )
    warm_ttl_s: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a warm child waits for a program before it is replaced.",
    )
    max_outstanding_calls: int = Field(
        default=64,
        ge=1,
        description="Binding calls one program may have in flight; the host stops reading "
        "the program's process until one settles.",
    )
    max_run_bytes: int = Field(
        default=64 * 2**20,
        ge=1024,
        description="Bytes the host reads from one program's process; past them the run "
        "fails with kind protocol.",
    )
    max_parallel_sub_calls: int = Field(
        default=10, ge=1, description="Sub-calls of one program that run at once."
    )
    size: int = Field(
        default=1, ge=1, le=64, description="Children kept booted and confined ahead of runs."
    )


class RayInitConfig(_Strict):
    """Options for ``ray.init``.

    ``runtime_env`` and ``log_to_driver`` apply whenever toolray connects this process to
    Ray (a local start or a cluster it attaches to); the resource and dashboard options only
    when toolray starts a local Ray itself. A Ray this process already initialised is used as
    it is.
    """

    num_cpus: int | None = Field(
        default=None,
        ge=1,
        description="CPUs of a Ray started locally (unset: Ray counts the machine's).",
    )
    num_gpus: int | None = Field(
        default=None,
        ge=0,
        description="GPUs of a Ray started locally (unset: Ray detects them).",
    )
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="Custom resources of a Ray started locally, e.g. { toolslot = 8 }.",
    )
    object_store_memory_mb: int | None = Field(
        default=None,
        ge=50,
        description="Object store size of a Ray started locally, in MiB (unset: Ray's "
        "default, 30% of memory).",
    )
    include_dashboard: bool | None = Field(
        default=None,
        description="Start Ray's dashboard with a local Ray (unset: Ray's default, which "
        "starts it when the ray[default] components are installed).",
    )
    dashboard_host: str | None = Field(
        default=None,
        min_length=1,
        description="Interface the dashboard of a local Ray listens on (unset: Ray's "
        '"127.0.0.1"; "0.0.0.0" exposes it to the network).',
    )
    dashboard_port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Port of the dashboard of a local Ray (unset: Ray's 8265).",
    )
    log_to_driver: bool = Field(
        default=True,
        description="Show what tool bodies print (their workers' stdout and stderr) in "
        "this driver's output, as Ray does by default.",
    )
    runtime_env: dict[str, Any] | None = Field(
        default=None,
        description="The job's Ray runtime_env: how tool code and its dependencies reach "
        'every node, e.g. { working_dir = "." } or { py_modules = ["my_tools"] }, '
        "plus pip, env_vars...",
    )


class RuntimeConfig(_Strict):
    """Everything the Ray runtime needs; every field has a local-machine default."""

    namespace: str = Field(
        default="toolray",
        min_length=1,
        description="The Ray namespace of the runtime's actors; drivers that name the same "
        "namespace share one registry, its scopes and pools.",
    )
    address: str | None = Field(
        default=None,
        description="Where Ray is: unset behaves like ray.init() (a Ray already running in "
        'this process, else RAY_ADDRESS or a "ray start" cluster on this machine, else a '
        'fresh local one); "auto" requires a running cluster; "local" always starts a '
        'fresh local Ray; "host:port" attaches to that cluster.',
    )
    mode: Literal["native", "code", "both"] = Field(
        default="native",
        description='The deployment presentation mode: "native" (the model calls tools '
        'directly), "code" (Code Mode: the model calls only run_code), or "both". A '
        "scope's present_as overrides it.",
    )
    kill_grace_ms: float = Field(
        default=300,
        gt=0,
        description="How long a body may keep running after its deadline or abort was "
        "forwarded and it was interrupted, before its worker is killed and replaced.",
    )
    cancel_grace_ms: float = Field(
        default=50,
        ge=0,
        description="How long a forwarded abort may take before the body is interrupted "
        "(its task cancelled, or its thread sent an exception).",
    )
    worker_transport: Literal["local", "ray"] = Field(
        default="local",
        description="How an executor actor sends calls to a worker on its own node. "
        '"local": on a private unix socket the worker opens for it (abstract, for its own '
        "user only, opened with a secret; about a tenth of an actor call's cost); aborts, "
        "interrupts, kills and workers on other nodes still go as Ray actor calls. "
        '"ray": every message is a Ray actor call.',
    )
    executor_idle_ttl_s: float = Field(
        default=300,
        gt=0,
        description="An executor actor with no batch for this long exits (a shard: only "
        "when all its scopes are idle); the next call starts it again.",
    )
    detached: bool = Field(
        default=False,
        description="Keep the namespace's actors alive when every driver is gone (until "
        "rt.teardown()); otherwise the last lease's end stops them.",
    )
    max_parallel_tool_calls: int = Field(
        default=10,
        ge=1,
        description="Concurrency-safe calls of one batch that may run at once (a batch's "
        "own max_parallel_tool_calls overrides it).",
    )
    control_resource: str | None = Field(
        default=None,
        min_length=1,
        description="A custom Ray resource that marks the nodes for the control actors "
        "(registry, executors, pool managers); unset: the head node.",
    )
    ray: RayInitConfig = Field(
        default_factory=RayInitConfig,
        description="Options for ray.init (the [ray] table).",
    )
    pool: PoolConfig = Field(
        default_factory=PoolConfig,
        description="The default worker pool (the [pool] table).",
    )
    pools: dict[str, PoolConfig] = Field(
        default_factory=dict,
        description='Named pools, selected by Placement(pool="<name>") ([pools.<name>] '
        "tables, same keys as [pool]).",
    )
    executors: ExecutorsConfig = Field(
        default_factory=ExecutorsConfig,
        description="How agent scopes map onto executor actors (the [executors] table).",
    )
    code: CodeConfig = Field(
        default_factory=CodeConfig,
        description="Code Mode (programmatic tool calling) on Ray: the run_code runtime "
        "(the [code] table).",
    )
    rate_limits: dict[str, RateLimitConfig] = Field(
        default_factory=dict,
        description="Rate limits by tool name ([rate_limits.<tool>] tables with per_second, "
        "burst, max_wait_ms), shared by every driver, executor and shard of the namespace; "
        "a table overrides the definition's rate_limit.",
    )
    max_result_bytes: int | None = Field(
        default=1 << 20,
        ge=1,
        description="The largest value a tool may return, in bytes of its JSON text "
        "(default 1 MiB; a definition's own max_result_bytes wins). A larger value fails "
        "RESULT_TOO_LARGE in the worker and never crosses the wire.",
    )
    max_content_chars: int | None = Field(
        default=None,
        ge=1,
        description="Text blocks of a result longer than this are cut, keeping their start, "
        'and end with "[… <n> characters truncated]" (unset: never; a definition\'s own '
        "max_content_chars wins).",
    )

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> RuntimeConfig:
        """Load and validate a TOML file; errors name the file and the field."""
        return load_config(path)


_PACKAGED = Path(__file__).with_name("configs")

SHIPPED = ("local", "cluster", "ci")
"""The names of the shipped configurations (``RayRuntime.start("cluster")``)."""


def packaged_configs() -> dict[str, Path]:
    """The configs shipped with toolray (``local``, ``cluster``, ``ci``), by name."""
    return {name: _PACKAGED / f"{name}.toml" for name in SHIPPED}


def config_file(name_or_path: str | os.PathLike[str]) -> Path:
    """The file ``name_or_path`` names: a shipped config for a bare name, else the path.

    Only the bare names ``"local"``, ``"cluster"`` and ``"ci"`` select shipped files; any
    other value is a path, and a path that does not exist is a ``ConfigError``.
    """
    if isinstance(name_or_path, str) and name_or_path in SHIPPED:
        return _PACKAGED / f"{name_or_path}.toml"
    path = Path(name_or_path)
    if not path.is_file():
        names = ", ".join(f'"{n}"' for n in SHIPPED)
        raise ConfigError(
            f"config file not found: {path} (a path to a TOML file, or a shipped config: {names})"
        )
    return path


def load_config(name_or_path: str | os.PathLike[str] | None = None) -> RuntimeConfig:
    """The configuration ``RayRuntime.start(config)`` runs with.

    ``name_or_path`` is a shipped config's name (``"local"``, ``"cluster"``, ``"ci"``) or
    the path of a TOML file; ``None`` reads ``$TOOLRAY_CONFIG`` (a name or a path), and
    without it every key keeps its default. Errors are ``ConfigError`` naming the file
    and the field.
    """
    if name_or_path is None:
        name_or_path = os.environ.get("TOOLRAY_CONFIG") or None
    if name_or_path is None:
        return RuntimeConfig()
    file = config_file(name_or_path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read config {file}: {err}") from None
    try:
        return RuntimeConfig.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"invalid config {file}: {problems}") from None
