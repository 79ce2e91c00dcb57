"""``PythonRuntime``: each program in a fresh, confined Python process."""

from __future__ import annotations

import asyncio
import functools
import math
import sys
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, final

from toolray import AbortSignal
from toolray.errors import AbortError, CodeRunFailedError, ToolTimeoutError

from ._failures import abort_error
from ._process import ChildProcess, WarmPool
from ._session import RunLimits, run_on_child
from ._types import DEFAULT_ALLOWED_IMPORTS, KIND_WORKER_EXIT, Binding, CodeRunOutcome
from ._types import code_run_failed as _failed

__all__ = ("CodeRuntimeStatistics", "PythonRuntime")


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRuntimeStatistics:
    """A snapshot of a runtime's counters."""

    runs: int
    """Runs started (a pre-aborted run is not started)."""
    succeeded: int
    failed: int
    """Runs that raised ``CodeRunFailedError``."""
    timed_out: int
    aborted: int
    in_flight: int
    warm: int
    """Children spawned and waiting for a run."""
    spawned: int
    """Children spawned since the runtime was made (each runs at most one program)."""


@final
class PythonRuntime:
    r"""Runs Python programs, each in a fresh process, with bindings as its only way out.

    Args:
        timeout_s: wall-clock deadline from the moment the program starts executing (past
            it the process is killed and the run raises ``ToolTimeoutError``); ``None``
            for none.
        memory_mb: the child's address-space limit (``RLIMIT_AS``); ``None`` for none.
        cpu_s: CPU seconds the program may use (``RLIMIT_CPU``; past it the run fails
            with kind ``timeout``); ``None`` for none.
        allowed_imports: the modules (top-level names) a program may import.
        python: the interpreter to run programs with.
        warm: how many children to keep started ahead of runs (0 starts one per run).

    Example:
        >>> import asyncio
        >>> from toolray import AbortController
        >>> async def double(args):
        ...     return args["n"] * 2
        >>> runtime = PythonRuntime(timeout_s=10, warm=0)
        >>> out = asyncio.run(runtime.run(
        ...     "print('hi')\nawait tools.double(n=21)", {"double": double},
        ...     AbortController().signal))
        >>> (out.logs, out.result, out.has_result)
        (['hi'], 42, True)
        >>> runtime.close()
    """

    language: ClassVar[str] = "python"

    def __init__(
        self,
        *,
        timeout_s: float | None = None,
        memory_mb: int | None = 512,
        cpu_s: float | None = None,
        allowed_imports: Iterable[str] = DEFAULT_ALLOWED_IMPORTS,
        python: str = sys.executable,
        warm: int = 1,
    ) -> None:
        _check_positive("timeout_s", timeout_s)
        _check_positive("cpu_s", cpu_s)
        if memory_mb is not None and (type(memory_mb) is not int or memory_mb < 16):
            raise ValueError(f"memory_mb must be an integer of at least 16, got {memory_mb!r}")
        if type(warm) is not int or warm < 0:
            raise ValueError(f"warm must be a non-negative integer, got {warm!r}")
        if not isinstance(python, str) or not python or "\0" in python:
            raise ValueError(f"python must be a path to an interpreter, got {python!r}")
        allowed = frozenset(allowed_imports)
        if not all(isinstance(name, str) and name.isidentifier() for name in allowed):
            raise ValueError("allowed_imports must hold top-level module names")
        self._limits = RunLimits(
            timeout_s=timeout_s, memory_mb=memory_mb, cpu_s=cpu_s, allowed_imports=allowed
        )
        self._pool = WarmPool(functools.partial(ChildProcess.spawn, python, allowed), warm)
        self._finalizer = weakref.finalize(self, self._pool.close)
        self._counts = dict.fromkeys(("runs", "succeeded", "failed", "timed_out", "aborted"), 0)
        self._in_flight = 0

    @property
    def allowed_imports(self) -> frozenset[str]:
        """The modules a program may import."""
        return self._limits.allowed_imports

    async def run(
        self, program: str, bindings: Mapping[str, Binding], signal: AbortSignal
    ) -> CodeRunOutcome:
        """Run ``program`` in a fresh process; its tools are ``bindings``.

        Raises:
            CodeRunFailedError: the program failed (``.kind`` says how, C-CODE-14).
            ToolTimeoutError: it outlived ``timeout_s``.
            AbortError: ``signal`` fired first (code ``ABORTED``).
            TypeError: ``program`` is not a string or a binding is not callable.
        """
        _check_call(program, bindings)
        if signal.aborted:
            raise abort_error(signal.reason)
        self._counts["runs"] += 1
        self._in_flight += 1
        try:
            outcome = await self._run(program, bindings, signal)
        except CodeRunFailedError:
            self._counts["failed"] += 1
            raise
        except ToolTimeoutError:
            self._counts["timed_out"] += 1
            raise
        except AbortError:
            self._counts["aborted"] += 1
            raise
        finally:
            self._in_flight -= 1
        self._counts["succeeded"] += 1
        return outcome

    async def _run(
        self, program: str, bindings: Mapping[str, Binding], signal: AbortSignal
    ) -> CodeRunOutcome:
        try:
            child = self._pool.take()
        except OSError as err:
            raise _failed(KIND_WORKER_EXIT, f"python spawn error: {err}") from err
        asyncio.get_running_loop().call_soon(self._pool.refill)
        return await run_on_child(child, program, bindings, signal, self._limits)

    async def wait_warm(self) -> None:
        """Spawn the warm children if needed and wait until each has booted."""
        self._pool.refill()
        loop = asyncio.get_running_loop()
        for child in self._pool.idle_children():
            ready: asyncio.Future[None] = loop.create_future()
            fd = child.pipes()[1].fileno()
            loop.add_reader(fd, _resolve, ready)
            try:
                await ready
            finally:
                loop.remove_reader(fd)

    def statistics(self) -> CodeRuntimeStatistics:
        """A frozen snapshot of the counters."""
        return CodeRuntimeStatistics(
            **self._counts,
            in_flight=self._in_flight,
            warm=self._pool.idle,
            spawned=self._pool.spawned,
        )

    def close(self) -> None:
        """Kill the warm children; later runs spawn a child each (idempotent)."""
        self._finalizer()

    def __repr__(self) -> str:
        limits = self._limits
        return (
            f"PythonRuntime(timeout_s={limits.timeout_s!r}, memory_mb={limits.memory_mb!r}, "
            f"cpu_s={limits.cpu_s!r})"
        )


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _check_positive(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number or None, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")


def _check_call(program: object, bindings: Mapping[str, Binding]) -> None:
    if not isinstance(program, str):
        raise TypeError(f"program must be a string, got {type(program).__name__}")
    for name, binding in bindings.items():
        if not isinstance(name, str) or not callable(binding):
            raise TypeError(f"binding {name!r} must be a callable under a string name")
