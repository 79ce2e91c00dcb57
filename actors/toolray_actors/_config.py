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
    """The worker pool: its size, per-worker concurrency and actor options."""

    size: int = Field(default=2, ge=1, le=256)
    max_concurrency: int = Field(default=64, ge=1)
    num_cpus: float = Field(default=0, ge=0)
    resources: dict[str, float] = Field(default_factory=dict)
    runtime_env: dict[str, Any] | None = None
    spare: int = Field(default=1, ge=0, le=8)


class ExecutorsConfig(_Strict):
    """How agent scopes map onto executor actors (API-v2 §16)."""

    mode: Literal["per_scope", "sharded"] = "per_scope"
    shards: int = Field(default=2, ge=1, le=1024)


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
