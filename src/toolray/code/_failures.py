"""How a run ends, in words: the texts of aborts, binding failures and dead children."""

from __future__ import annotations

import contextlib
import signal as signals
from typing import Any

from toolray import HarnessError
from toolray.errors import AbortError

__all__ = ("abort_error", "exit_status", "failure_message", "last_line", "memory_text", "seconds")


def abort_error(reason: Any) -> AbortError:
    """``ABORTED`` for an outer abort, naming (and chained to) the signal's reason."""
    text = reason.message if isinstance(reason, HarnessError) else str(reason)
    err = AbortError(f"code run aborted: {text}")
    if isinstance(reason, BaseException):
        err.__cause__ = reason
    return err


def failure_message(err: Exception) -> str:
    """What a program sees of a failed binding: the message only (C-CODE-5)."""
    text = err.message if isinstance(err, HarnessError) else str(err)
    return text or type(err).__name__


def seconds(value: float | None) -> str:
    """``1`` for 1.0, ``1.5`` as is."""
    return "?" if value is None else (str(int(value)) if float(value).is_integer() else str(value))


def memory_text(memory_mb: int | None) -> str:
    """The ``memory`` failure's message."""
    limit = "" if memory_mb is None else f" ({memory_mb} MiB)"
    return f"MemoryError: the program ran out of memory{limit}"


def exit_status(status: int) -> str:
    """``signal SIGSEGV`` or ``code 3`` for a ``Popen.returncode``."""
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"signal {signals.Signals(-status).name}"
    return f"code {status}"


def last_line(tail: bytearray) -> str:
    """``": <the last non-blank line>"`` of the child's stderr, or nothing."""
    lines = [line for line in bytes(tail).decode("utf-8", "replace").splitlines() if line.strip()]
    return f": {lines[-1].strip()[:500]}" if lines else ""
