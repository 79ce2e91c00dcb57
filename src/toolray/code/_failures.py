"""How a run ends, in words: the texts of aborts, binding failures and dead children.

Text a child sent reaches a model only cleaned: lone surrogates (which UTF-8 cannot carry)
become U+FFFD (:func:`clean`, :func:`cleaned`), and the host's own messages repeat at most
:data:`ECHO_CHARS` characters of it (:func:`echo`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from toolray import HarnessError
from toolray.errors import AbortError

__all__ = (
    "ECHO_CHARS",
    "abort_error",
    "clean",
    "cleaned",
    "echo",
    "failure_message",
    "last_line",
    "memory_text",
    "seconds",
)

ECHO_CHARS = 200
"""The most characters of child-supplied text any message of the host repeats."""


def echo(text: str) -> str:
    """``text`` as the host may repeat it: at most :data:`ECHO_CHARS` characters of it."""
    return text if len(text) <= ECHO_CHARS else text[:ECHO_CHARS] + "…"


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    r"""``text`` with each lone surrogate replaced by U+FFFD.

    Example:
        >>> clean("a\ud800b") == "a\ufffdb"
        True
    """
    return _SURROGATE.sub("\ufffd", text)


def cleaned(value: Any) -> Any:
    """A JSON value whose strings (keys too) hold no lone surrogate (``value`` itself if none)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.loads(clean(json.dumps(value, ensure_ascii=False)))
    return value


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


def last_line(tail: bytearray) -> str:
    """``": <the last non-blank line>"`` of the child's stderr, or nothing."""
    lines = [line for line in bytes(tail).decode("utf-8", "replace").splitlines() if line.strip()]
    return f": {echo(lines[-1].strip())}" if lines else ""
