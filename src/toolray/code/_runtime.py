"""``PythonRuntime``: each program in a fresh process, confined by the kernel."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import socket
import sys
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Final, final

from toolray import AbortSignal
from toolray.errors import (
    AbortError,
    CodeRunFailedError,
    SandboxUnavailableError,
    ToolrayError,
    ToolTimeoutError,
)
from toolray.procs import Template, TemplateError

from . import _session as session
from ._cgroup import delegated
from ._checks import check_call, check_settings, read_path_list
from ._confinement import (
    Confinement,
    ConfinementMode,
    from_report,
    missing_for_strict,
    refused_layers,
    wanted_layers,
)
from ._failures import abort_error
from ._process import CodeChild, WarmPool, fork_child, template_spec
from ._types import DEFAULT_ALLOWED_IMPORTS, KIND_WORKER_EXIT, Binding, CodeRunOutcome
from ._types import code_run_failed as _failed

__all__ = ("CodeRuntimeStatistics", "PythonRuntime")

_MIB: Final = 1024 * 1024
_SCRATCH_INODES: Final = 16384
_WAIT_WARM_ROUNDS: Final = 3
_FORK_WAIT_S: Final = 5.0


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
    """Children forked and waiting for a run."""
    spawned: int
    """Children forked since the runtime was made (each runs at most one program)."""


@final
class PythonRuntime:
    r"""Runs Python programs, each in a fresh confined process; bindings are its only way out.

    Each program runs in a child forked from the runtime's template process, inside the
    layers ``confinement`` asks for (see :meth:`confinement` and the Code Mode security
    page): its own user, pid, network, mount and ipc namespaces, a read-only root holding
    the standard library, the allowed modules and ``read_paths``, a Landlock domain, a
    seccomp allow-list, resource limits; it writes only its scratch directory.

    Args:
        timeout_s: wall-clock deadline from the moment the program starts executing (past
            it the process is killed and the run raises ``ToolTimeoutError``); ``None``
            (only when passed) for none.
        cpu_s: CPU seconds the program may use (past them the run fails with kind
            ``timeout``); ``None`` (only when passed) for none.
        memory_mb: the child's address-space limit (``RLIMIT_AS``); ``None`` for none.
        scratch_mb: the size of the scratch directory (the working directory, a tmpfs
            shared with ``/dev/shm``), and the largest file the program may write.
        allowed_imports: the modules (top-level names) a program may import.
        read_paths: absolute paths (files or directories) a program may also read.
        confinement: ``"auto"`` (every layer this host offers; the rest is reported),
            ``"strict"`` (all of them, else ``SandboxUnavailableError`` here) or
            ``"off"`` (resource limits, the syscall filter and the import guard only).
        python: the interpreter to run programs with.
        warm: how many children to keep booted ahead of runs (0 forks one per run).
        warm_ttl_s: how long a warm child waits for a run; past it, it is never handed
            out, it ends, and the next run (or ``wait_warm()``) forks its replacement.
        max_outstanding_calls: binding calls one run may have in flight (the host stops
            reading the child until one settles).
        max_run_bytes: bytes the host reads from one run's child (past them the run fails
            with kind ``protocol``).

    Example:
        >>> import asyncio
        >>> from toolray import AbortController
        >>> async def double(args):
        ...     return args["n"] * 2
        >>> runtime = PythonRuntime(warm=0)
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
        timeout_s: float | None = 30.0,
        cpu_s: float | None = 10.0,
        memory_mb: int | None = 512,
        scratch_mb: int = 64,
        allowed_imports: Iterable[str] = DEFAULT_ALLOWED_IMPORTS,
        read_paths: Iterable[str | os.PathLike[str]] = (),
        confinement: ConfinementMode = "auto",
        python: str = sys.executable,
        warm: int = 1,
        warm_ttl_s: float = 60.0,
        max_outstanding_calls: int = 64,
        max_run_bytes: int = 64 * 2**20,
    ) -> None:
        allowed = check_settings(
            timeout_s=timeout_s,
            cpu_s=cpu_s,
            memory_mb=memory_mb,
            scratch_mb=scratch_mb,
            allowed_imports=allowed_imports,
            confinement=confinement,
            python=python,
            warm=warm,
            warm_ttl_s=warm_ttl_s,
            max_outstanding_calls=max_outstanding_calls,
            max_run_bytes=max_run_bytes,
        )
        self._mode: ConfinementMode = confinement
        self._refused = refused_layers()
        self._cgroup = delegated()
        wanted = wanted_layers(confinement, self._refused)
        memory = None if memory_mb is None else memory_mb * _MIB
        config: dict[str, object] = {"mode": confinement, "layers": wanted}
        config["allowed"] = sorted(allowed)
        config |= {"memory_bytes": memory, "cpu_s": cpu_s}
        config["warm_ttl_s"] = warm_ttl_s + max(1.0, warm_ttl_s / 10)  # the host's check first
        config |= {"scratch_bytes": scratch_mb * _MIB, "scratch_inodes": _SCRATCH_INODES}
        config["read_paths"] = read_path_list(read_paths)
        self._template = Template(template_spec(python, config))
        self._fork = _forker(self._template, "pid_namespace" in wanted, (self._cgroup[0], memory))
        self._pool = WarmPool(self._fork, warm, warm_ttl_s)
        strict = tuple(wanted) if confinement == "strict" else ()
        self._limits = session.RunLimits(
            timeout_s=timeout_s,
            memory_mb=memory_mb,
            cpu_s=cpu_s,
            allowed_imports=allowed,
            max_outstanding_calls=max_outstanding_calls,
            max_run_bytes=max_run_bytes,
            required=strict,
        )
        self._finalizer = weakref.finalize(self, _shut, self._pool, self._template)
        self._counts = dict.fromkeys(("runs", "succeeded", "failed", "timed_out", "aborted"), 0)
        self._in_flight = 0
        self._closed = False
        self._confinement: Confinement | None = None
        if confinement == "strict":
            self._require_every_layer()

    @property
    def allowed_imports(self) -> frozenset[str]:
        """The modules a program may import."""
        return self._limits.allowed_imports

    # -- confinement ----------------------------------------------------------------------
    def confinement(self) -> Confinement:
        """The layers that confine this runtime's programs (probed once, with a real child).

        It blocks while the first child boots (a fraction of a second); that child then
        serves the first run.
        """
        if self._confinement is None:
            self._confinement = self._probe()
            if self._closed and self._in_flight == 0:
                self._template.stop()  # a closed runtime keeps no process between runs
        return self._confinement

    def _probe(self) -> Confinement:
        timeout = session.BOOT_TIMEOUT_S
        child = None
        try:
            child = self._pool.take_waiting(timeout) or self._pool.fork().result(timeout)
            report = child.read_ready(timeout)
        except (OSError, ToolrayError, concurrent.futures.TimeoutError) as err:
            if child is not None:
                child.discard_now()
            reason = f"no child could be started: {err}"
            report = {"missing": dict.fromkeys(wanted_layers(self._mode, self._refused), reason)}
        else:
            if not self._pool.put_back(child):
                child.discard_now()
        cgroup = (self._cgroup[0] is not None, self._cgroup[1])
        return from_report(self._mode, report, self._refused, cgroup)

    def _require_every_layer(self) -> None:
        missing = missing_for_strict(self.confinement(), self._cgroup[0] is not None)
        if missing:
            self.close()
            raise SandboxUnavailableError(missing)

    # -- running --------------------------------------------------------------------------
    async def run(
        self, program: str, bindings: Mapping[str, Binding], signal: AbortSignal
    ) -> CodeRunOutcome:
        """Run ``program`` in a fresh confined process; its tools are ``bindings``.

        Raises:
            CodeRunFailedError: the program failed (``.kind`` says how, C-CODE-14).
            ToolTimeoutError: it outlived ``timeout_s``.
            AbortError: ``signal`` fired first (code ``ABORTED``).
            TypeError: ``program`` is not a string or a binding is not callable.
        """
        check_call(program, bindings)
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
            if self._closed and self._in_flight == 0:
                self._template.stop()  # a closed runtime keeps no process between runs
        self._counts["succeeded"] += 1
        return outcome

    async def _run(
        self, program: str, bindings: Mapping[str, Binding], signal: AbortSignal
    ) -> CodeRunOutcome:
        child = await self._take()
        try:
            return await session.run_on_child(child, program, bindings, signal, self._limits)
        finally:
            if not self._closed:  # the next child boots after this run, not beside it
                asyncio.get_running_loop().call_soon(self._refill)

    def _refill(self) -> None:
        """Fork the next warm children and wait (briefly) until they exist.

        Called right after a run returned, so the fork is off the run's path; waiting for
        it keeps a runtime's processes from appearing later, unbidden. The children then
        build their sandboxes on their own.
        """
        self._pool.refill()
        for future in self._pool.pending():
            with contextlib.suppress(Exception):  # a failed fork shows at the next take
                future.result(_FORK_WAIT_S)

    async def _take(self) -> CodeChild:
        timeout = session.BOOT_TIMEOUT_S
        try:
            return await asyncio.wait_for(self._pool.take(), timeout)
        except TimeoutError:
            self._template.stop(timeout=0)  # a template that never boots is broken
            message = f"python did not start the program within {timeout}s"
            raise _failed(KIND_WORKER_EXIT, message) from None
        except TemplateError as err:
            status = err.status
            if status is None:
                raise _failed(KIND_WORKER_EXIT, f"python failed: {err.message}") from err
            message = f"python exited ({status.describe()}) before completing"
            raise _failed(KIND_WORKER_EXIT, message) from err
        except OSError as err:
            raise _failed(KIND_WORKER_EXIT, f"python spawn error: {err}") from err

    async def wait_warm(self) -> None:
        """Fork the warm children if needed and wait until each has built its sandbox.

        A waiting child that ended meanwhile (its time to live ran out) is waited for
        until its replacement is ready.

        Raises:
            OSError: the interpreter could not be started.
            toolray.procs.TemplateError: the template died or refused to fork.
        """
        for _ in range(_WAIT_WARM_ROUNDS):
            self._pool.refill()
            if all([await self._ready(future) for future in self._pool.pending()]):
                return

    async def _ready(self, future: concurrent.futures.Future[CodeChild]) -> bool:
        """Wait until the child has sent its ready report; ``False`` if it ended or aged."""
        child = await asyncio.shield(asyncio.wrap_future(future))
        if not self._pool.usable(child):
            self._pool.drop(future)
            return False
        if child.report is not None:
            return True
        loop = asyncio.get_running_loop()
        readable: asyncio.Future[None] = loop.create_future()
        fd = child.channel.fileno()
        loop.add_reader(fd, _resolve, readable)
        try:
            await readable
        finally:
            loop.remove_reader(fd)
        with contextlib.suppress(OSError):
            if child.channel.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT):
                return True
        self._pool.drop(future)  # it ended before it was ready
        return False

    def statistics(self) -> CodeRuntimeStatistics:
        """A frozen snapshot of the counters."""
        return CodeRuntimeStatistics(
            **self._counts,
            in_flight=self._in_flight,
            warm=self._pool.idle,
            spawned=self._pool.spawned,
        )

    def close(self) -> None:
        """Stop the runtime's processes: the warm children and the template (idempotent).

        A later run still works: it starts a template and one child for itself.
        """
        self._closed = True
        _shut(self._pool, self._template)

    def __repr__(self) -> str:
        limits = self._limits
        return (
            f"PythonRuntime(timeout_s={limits.timeout_s!r}, memory_mb={limits.memory_mb!r}, "
            f"cpu_s={limits.cpu_s!r}, confinement={self._mode!r})"
        )


def _forker(
    template: Template, pid_namespace: bool, cgroup: tuple[str | None, int | None]
) -> Callable[[], concurrent.futures.Future[CodeChild]]:
    """Forks for the pool (a closure that does not hold the runtime, so it can be collected)."""
    return lambda: fork_child(template, pid_namespace, cgroup)


def _shut(pool: WarmPool, template: Template) -> None:
    for child in pool.close():
        child.discard_now()
    template.stop()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
