"""A run's channel to its child: the limits it enforces, the protocol, how a child ended."""

from __future__ import annotations

import asyncio
import signal as signals
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from toolray.errors import CodeRunFailedError
from toolray.procs import ExitStatus, ProtocolError

from ._failures import echo, last_line, memory_text, seconds
from ._types import KIND_CPU, KIND_MEMORY, KIND_WORKER_EXIT, Binding, code_run_failed

__all__ = (
    "EXIT_CPU",
    "EXIT_MEMORY",
    "READ_CHUNK",
    "ChannelProtocol",
    "ChildProtocol",
    "RunLimits",
    "ended",
    "field",
    "noop",
    "parameter_names",
)

EXIT_MEMORY: Final = 86
"""The child's exit status when it could not even report a ``MemoryError``."""
EXIT_CPU: Final = 87
"""The child's exit status when its CPU budget ran out (``SIGXCPU``)."""
READ_CHUNK: Final = 64 * 1024
"""Bytes received at most per read of the child's socket, into one reused buffer. A larger
read costs more than it saves: a buffer past the C library's mmap threshold (128 KiB) is
mapped and unmapped on every read (asyncio's default 256 KiB read cost 10× a 64 KiB one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """What the child is told to enforce, and the host's deadline."""

    timeout_s: float | None
    memory_mb: int | None
    cpu_s: float | None
    allowed_imports: frozenset[str]
    max_outstanding_calls: int = 64
    max_run_bytes: int = 64 * 2**20
    required: tuple[str, ...] = ()
    """Layers a child must report active (``strict``); a child without one is refused."""


class ChildProtocol(asyncio.Protocol):
    """Bytes and EOF of one child stream (its stderr), as callbacks."""

    def __init__(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool:
        self._on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


class ChannelProtocol(asyncio.BufferedProtocol):
    """The child's socket: bytes, EOF and write-buffer pressure, as callbacks.

    The bytes are a view of one reused buffer, valid during the callback only.
    """

    def __init__(
        self,
        on_data: Callable[[memoryview], None],
        on_eof: Callable[[], None],
        on_writing: Callable[[bool], None],
    ) -> None:
        self._on_data = on_data
        self._on_eof = on_eof
        self._on_writing = on_writing
        self._buffer = memoryview(bytearray(READ_CHUNK))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._on_data(self._buffer[:nbytes])

    def eof_received(self) -> bool:
        self._on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()

    def pause_writing(self) -> None:
        self._on_writing(True)

    def resume_writing(self) -> None:
        self._on_writing(False)


def ended(
    status: ExitStatus, limits: RunLimits, stderr_tail: bytearray, logs: Sequence[str]
) -> CodeRunFailedError:
    """The failure of a run whose child ended before it settled the run."""
    if _cpu_exhausted(status, limits.cpu_s):
        message = f"CPU budget ({seconds(limits.cpu_s)}s) exhausted"
        return code_run_failed(KIND_CPU, message, list(logs))
    if status.code == EXIT_MEMORY:
        return code_run_failed(KIND_MEMORY, memory_text(limits.memory_mb), list(logs))
    message = f"python exited ({status.describe()}) before completing"
    if status.signal == signals.SIGSYS:
        message += ": the syscall filter killed it (a forbidden system call or entry point)"
    return code_run_failed(KIND_WORKER_EXIT, message + last_line(stderr_tail), list(logs))


def _cpu_exhausted(status: ExitStatus, cpu_s: float | None) -> bool:
    """Its own handler saw ``SIGXCPU``, or the hard limit's ``SIGKILL`` ended it."""
    if status.code == EXIT_CPU or status.signal == signals.SIGXCPU:
        return True
    return status.signal == signals.SIGKILL and cpu_s is not None and status.cpu_s >= cpu_s


def field(frame: dict[str, Any], key: str, kind: type) -> Any:
    value = frame.get(key)
    if type(value) is not kind:
        raise ProtocolError(f'frame "{echo(frame["op"])}" has no {kind.__name__} "{key}"')
    return value


def parameter_names(binding: Binding) -> list[str] | None:
    names = getattr(binding, "parameter_names", None)
    if names is None or isinstance(names, str):
        return None
    return [str(name) for name in names]


def noop() -> None:
    pass
