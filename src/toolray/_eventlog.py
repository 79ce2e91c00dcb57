"""Durable ``tool/call`` and ``tool/result`` records, and where a batch step writes them.

``JsonlEventLog`` writes one JSON object per line with one ``write`` of the whole line,
flushes it to the OS at once (so a killed process loses no appended record) and fsyncs at
each batch boundary (so an OS crash loses at most the open batch).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, final, runtime_checkable

__all__ = ("EventLog", "JsonlEventLog", "LogStep", "MemoryEventLog", "read_jsonl")


@runtime_checkable
class EventLog(Protocol):
    """A sink for durable events (``dict``s)."""

    def append(self, event: dict[str, Any]) -> None:
        """Record one event."""
        ...


@dataclass(frozen=True, slots=True)
class LogStep:
    """Where a batch's ``tool/call`` and ``tool/result`` records go (and its calls' own).

    A call carries its batch's step (``ToolExecutionInput.log``), so a ``run_code`` call
    writes its sub-calls' ``tool/ptc-dispatch-start`` / ``tool/ptc-dispatch`` records
    (programmatic tool calling: the program's calls) to the same sink, with the same
    ``turn`` and ``step``.
    """

    turn: int
    step: int
    sink: EventLog


@final
class MemoryEventLog:
    """Keeps events in ``events``, in append order."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def append(self, event: dict[str, Any]) -> None:
        """Record one event."""
        self.events.append(event)

    def sync(self) -> None:
        """Nothing to sync in memory."""


@final
class JsonlEventLog:
    """Appends events to a JSON-lines file.

    Example:
        >>> import tempfile, pathlib
        >>> path = pathlib.Path(tempfile.mkdtemp()) / "log.jsonl"
        >>> with JsonlEventLog(path) as log:
        ...     log.append({"type": "tool/call", "callId": "c1"})
        >>> read_jsonl(path)
        [{'type': 'tool/call', 'callId': 'c1'}]
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lock = threading.Lock()

    def append(self, event: dict[str, Any]) -> None:
        """Write one line (a single ``write``), visible to readers at once."""
        # ASCII escapes keep every line valid UTF-8, even for lone surrogates in strings.
        line = (json.dumps(event, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")
        with self._lock:
            os.write(self._fd, line)

    def sync(self) -> None:
        """Flush to stable storage (called at each batch boundary)."""
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)

    def close(self) -> None:
        """Sync and close the file."""
        with self._lock:
            if self._fd >= 0:
                os.fsync(self._fd)
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> JsonlEventLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read every complete line of a JSON-lines log."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.endswith("\n")]
