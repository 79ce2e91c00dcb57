"""Code Mode on Ray: the code runtime an actor mounts, from the ``[code]`` config table.

Every core registry the Ray layer builds (the registry actor's, each executor's mirror) is
made by :func:`code_registry`: the deployment ``mode``, ``max_parallel_sub_calls`` and a
:class:`CodePool` as its code runtime, so a scope whose effective mode is ``code`` or
``both`` has a working ``run_code`` with the same schema, flavour and SDK everywhere.

Where programs run: the ``run_code`` body runs inside the scope's executor actor (it is
not a mirrored definition, so the worker runner runs it inline), and the pool's
``PythonRuntime`` runs each program in a fresh child forked from its template process (a
child of that actor), confined as ``[code] confinement`` asks — the same layers wherever
the actor runs.
Every binding call is a nested call through the executor's own pipeline — the scope's
policies, guards and hooks — and its body goes to a worker of its pool like any other
call. Moving the program into a worker of a dedicated ``code`` pool, its bindings coming
back over nested dispatch, needs only this module to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, final

from toolray import AbortSignal, ToolRegistry
from toolray.code import DEFAULT_ALLOWED_IMPORTS, CodeRunOutcome, Confinement, PythonRuntime
from toolray.farm import RateLimiter
from toolray.lowlevel import Instances
from toolray_actors._config import CodeConfig, RuntimeConfig

__all__ = ("CodePool", "code_registry")


@final
class CodePool:
    """A ``PythonRuntime`` made from a :class:`CodeConfig` on the first program.

    An actor that never runs a program (the registry actor, or an executor of native
    scopes) starts no child process; ``language`` and ``allowed_imports`` need none.
    """

    language: ClassVar[str] = "python"

    def __init__(self, config: CodeConfig) -> None:
        self._config = config
        self._runtime: PythonRuntime | None = None

    @property
    def allowed_imports(self) -> frozenset[str]:
        """The modules a program may import (the SDK text lists them)."""
        names = self._config.allowed_imports
        return DEFAULT_ALLOWED_IMPORTS if names is None else frozenset(names)

    @property
    def started(self) -> bool:
        """Whether a program has run (the runtime and its warm children exist)."""
        return self._runtime is not None

    def runtime(self) -> PythonRuntime:
        """The runtime, made now if needed (``size`` children are kept warm).

        Raises:
            SandboxUnavailableError: ``confinement = "strict"`` and a layer is missing here.
        """
        if self._runtime is None:
            cfg = self._config
            self._runtime = PythonRuntime(
                timeout_s=cfg.timeout_s,
                cpu_s=cfg.cpu_s,
                memory_mb=cfg.memory_mb,
                scratch_mb=cfg.scratch_mb,
                allowed_imports=self.allowed_imports,
                read_paths=cfg.read_paths,
                confinement=cfg.confinement,
                warm=cfg.size,
                warm_ttl_s=cfg.warm_ttl_s,
                max_outstanding_calls=cfg.max_outstanding_calls,
                max_run_bytes=cfg.max_run_bytes,
            )
        return self._runtime

    async def run(
        self, program: str, bindings: Mapping[str, Any], signal: AbortSignal
    ) -> CodeRunOutcome:
        """Run one program (see ``toolray.code.CodeRuntime``)."""
        return await self.runtime().run(program, bindings, signal)

    def confinement(self) -> Confinement | None:
        """The layers confining this actor's programs (``None`` before the first program)."""
        return None if self._runtime is None else self._runtime.confinement()

    def statistics(self) -> dict[str, int]:
        """The runtime's counters (zeros before the first program)."""
        if self._runtime is None:
            return {"runs": 0, "in_flight": 0, "warm": 0, "spawned": 0}
        stats = self._runtime.statistics()
        return {
            "runs": stats.runs,
            "in_flight": stats.in_flight,
            "warm": stats.warm,
            "spawned": stats.spawned,
        }

    def close(self) -> None:
        """Kill the warm children (idempotent)."""
        if self._runtime is not None:
            self._runtime.close()


def code_registry(
    config: RuntimeConfig,
    pool: CodePool,
    rate_limiter: RateLimiter | None = None,
    environments: Instances | None = None,
) -> ToolRegistry:
    """A core registry for an actor: the config's mode, caps, bounds and rate limiter.

    ``pool`` is mounted as its Code Mode runtime; ``rate_limiter`` (an executor's) shares
    the namespace's token buckets; ``environments`` are the executor's instances (kept
    across the mirrors it rebuilds).
    """
    return ToolRegistry(
        mode=config.mode,
        code_runtime=pool,
        max_parallel_sub_calls=config.code.max_parallel_sub_calls,
        max_result_bytes=config.max_result_bytes,
        max_content_chars=config.max_content_chars,
        rate_limiter=rate_limiter,
        environments=environments,
    )
