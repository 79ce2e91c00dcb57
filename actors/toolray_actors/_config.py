"""``RuntimeConfig``: how the Ray layer starts, sizes its pools and escalates cancellation.

Loaded from TOML (``configs/*.toml``), validated by pydantic; unknown keys are errors.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from toolray.errors import ToolrayError

__all__ = (
    "CodeConfig",
    "ConfigError",
    "ExecutorsConfig",
    "PoolConfig",
    "RayInitConfig",
    "RuntimeConfig",
    "load_config",
)


class ConfigError(ToolrayError, ValueError):
    """A configuration file that cannot be read or does not validate."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PoolConfig(_Strict):
    """The worker pool: its size, per-worker concurrency, isolation and actor options."""

    size: int = Field(default=2, ge=1, le=256)
    max_concurrency: int = Field(default=64, ge=1)
    num_cpus: float = Field(default=0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    runtime_env: dict[str, Any] | None = None
    spare: int = Field(default=1, ge=0, le=8)
    isolation: Literal["call", "shared"] = Field(
        default="call",
        description='How far a tool body\'s fault reaches. "call": each call runs alone in a '
        "child process of the worker (forked from a warm template holding the tools' code), "
        "so a crash, a memory blow-up or a kill at the deadline fails that call only. "
        '"shared": bodies run as threads and tasks of the worker itself (fastest; a fault '
        "fails every call in that worker). A pool with GPUs (num_gpus > 0) that does not set "
        'it explicitly runs "shared", one call at a time per worker.',
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


class ExecutorsConfig(_Strict):
    """How agent scopes map onto executor actors (API-v2 §16)."""

    mode: Literal["per_scope", "sharded"] = "per_scope"
    shards: int = Field(default=2, ge=1, le=1024)


class CodeConfig(_Strict):
    """Code Mode on Ray (API-v2 §14): the ``run_code`` runtime and its pool."""

    timeout_s: float | None = Field(default=None, gt=0)
    memory_mb: int = Field(default=512, ge=16)
    cpu_s: float | None = Field(default=None, gt=0)
    allowed_imports: tuple[str, ...] | None = None
    max_parallel_sub_calls: int = Field(default=10, ge=1)
    size: int = Field(default=1, ge=1, le=64)


class RayInitConfig(_Strict):
    """Options for ``ray.init`` when toolray starts Ray itself."""

    num_cpus: int | None = Field(default=None, ge=1)
    include_dashboard: bool = False
    object_store_memory_mb: int | None = Field(default=None, ge=50)
    log_to_driver: bool = False


class RuntimeConfig(_Strict):
    """Everything the Ray runtime needs; every field has a local-machine default."""

    namespace: str = Field(default="toolray", min_length=1)
    address: str | None = None
    mode: Literal["native", "code", "both"] = "native"
    """The deployment presentation mode (a scope's ``present_as`` overrides it)."""
    kill_grace_ms: float = Field(default=300, gt=0)
    cancel_grace_ms: float = Field(default=50, ge=0)
    executor_idle_ttl_s: float = Field(default=300, gt=0)
    detached: bool = False
    max_parallel_tool_calls: int = Field(default=10, ge=1)
    control_resource: str | None = Field(default=None, min_length=1)
    ray: RayInitConfig = Field(default_factory=RayInitConfig)
    pool: PoolConfig = Field(default_factory=PoolConfig)
    pools: dict[str, PoolConfig] = Field(default_factory=dict)
    executors: ExecutorsConfig = Field(default_factory=ExecutorsConfig)
    code: CodeConfig = Field(default_factory=CodeConfig)

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str]) -> RuntimeConfig:
        """Load and validate a TOML file; errors name the file and the field."""
        return load_config(path)


_PACKAGED = Path(__file__).with_name("configs")


def packaged_configs() -> dict[str, Path]:
    """The configs shipped with toolray_actors (``local``, ``cluster``, ``ci``), by name."""
    return {p.stem: p for p in sorted(_PACKAGED.glob("*.toml"))}


def _resolve(path: Path) -> Path:
    """``path`` if it exists, else the shipped config of that name.

    So ``"cluster"`` and ``"configs/cluster.toml"`` work from any directory.
    """
    if path.exists():
        return path
    shipped = packaged_configs().get(path.stem)
    return shipped if shipped is not None and path.suffix in ("", ".toml") else path


def load_config(path: str | os.PathLike[str] | None = None) -> RuntimeConfig:
    """Load ``path`` (or ``$TOOLRAY_CONFIG``, or the defaults when neither is given).

    ``path`` is a TOML file, or the name of a shipped config: ``"local"``, ``"cluster"``,
    ``"ci"`` (also ``"configs/cluster.toml"`` from a directory that has no such file).
    """
    if path is None:
        path = os.environ.get("TOOLRAY_CONFIG") or None
    if path is None:
        return RuntimeConfig()
    file = _resolve(Path(path))
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {file}") from None
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"cannot read config {file}: {err}") from None
    try:
        return RuntimeConfig.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"invalid config {file}: {problems}") from None
