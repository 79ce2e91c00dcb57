"""Values and seams of Code Mode: the outcome, the binding, the runtime protocol, the kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Protocol, runtime_checkable

from toolray import AbortSignal, JsonValue
from toolray.errors import CodeRunFailedError

__all__ = (
    "DEFAULT_ALLOWED_IMPORTS",
    "FAILURE_KINDS",
    "KIND_CPU",
    "KIND_EXCEPTION",
    "KIND_IMPORT",
    "KIND_INVALID_OUTPUT",
    "KIND_MEMORY",
    "KIND_OUTPUT_LIMIT",
    "KIND_PROTOCOL",
    "KIND_SYNTAX",
    "KIND_WORKER_EXIT",
    "Binding",
    "BindingError",
    "CodeRunOutcome",
    "CodeRuntime",
    "code_run_failed",
)

DEFAULT_ALLOWED_IMPORTS: Final[frozenset[str]] = frozenset(
    {
        "asyncio",
        "json",
        "math",
        "cmath",
        "re",
        "datetime",
        "time",
        "itertools",
        "collections",
        "functools",
        "operator",
        "statistics",
        "random",
        "string",
        "textwrap",
        "decimal",
        "fractions",
        "typing",
        "dataclasses",
        "enum",
        "heapq",
        "bisect",
        "copy",
        "pprint",
        "uuid",
        "hashlib",
        "base64",
        "difflib",
        "unicodedata",
    }
)
"""Pure standard-library modules a program may import by default."""

# The kind words. The common ones (``exception``, ``invalid-output``, ``output-limit``,
# ``worker-exit``, and ``timeout`` for the kernel's CPU meter) are the usual words of Code
# Mode runtimes; the others tell apart failures a coarser runtime reports as ``exception``
# (a syntax error, a MemoryError).
KIND_SYNTAX: Final = "syntax"
"""The program does not compile (``SyntaxError: invalid syntax (line 1)``)."""
KIND_EXCEPTION: Final = "exception"
"""The program raised (``ZeroDivisionError: division by zero``), ``SystemExit`` included."""
KIND_IMPORT: Final = "import"
"""The program imported a module outside ``allowed_imports``."""
KIND_INVALID_OUTPUT: Final = "invalid-output"
"""The last expression's value is not lossless JSON."""
KIND_OUTPUT_LIMIT: Final = "output-limit"
"""The result does not fit in one protocol frame."""
KIND_MEMORY: Final = "memory"
"""The program ran out of its address space (``memory_mb``)."""
KIND_CPU: Final = "timeout"
"""The program used up its CPU seconds (``cpu_s``; the kernel's ``SIGXCPU``)."""
KIND_WORKER_EXIT: Final = "worker-exit"
"""The process died before the program settled (a crash, ``os._exit``, a signal)."""
KIND_PROTOCOL: Final = "protocol"
"""The process broke the frame protocol (garbage, an oversized or malformed frame)."""

FAILURE_KINDS: Final[frozenset[str]] = frozenset(
    {
        KIND_SYNTAX,
        KIND_EXCEPTION,
        KIND_IMPORT,
        KIND_INVALID_OUTPUT,
        KIND_OUTPUT_LIMIT,
        KIND_MEMORY,
        KIND_CPU,
        KIND_WORKER_EXIT,
        KIND_PROTOCOL,
    }
)


def code_run_failed(
    kind: str, message: str, logs: list[str] | tuple[str, ...] = ()
) -> CodeRunFailedError:
    r"""Build the C-CODE-14 failure: ``code run failed (<kind>): <message>`` plus the logs.

    The error also carries ``.kind`` (one of :data:`FAILURE_KINDS`).

    Example:
        >>> code_run_failed("exception", "ValueError: x", ["a", "b"]).message
        'code run failed (exception): ValueError: x\nCaptured output:\na\nb'
    """
    text = f"code run failed ({kind}): {message}"
    if logs:
        text += "\nCaptured output:\n" + "\n".join(logs)
    err = CodeRunFailedError(text)
    setattr(err, "kind", kind)  # noqa: B010 - an extra field the core's class does not declare
    return err


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeRunOutcome:
    """What a settled program produced: one ``logs`` entry per ``print()``, and its result.

    ``has_result`` tells "the last statement was an expression whose value is ``None``"
    (``result=None, has_result=True``) from "there was no last expression".
    """

    logs: list[str] = field(default_factory=list)
    result: JsonValue = None
    has_result: bool = False


class BindingError(Exception):
    """Raised by a binding to fail one sub-call: the program sees ``ToolCallError(message)``.

    Any other exception a binding raises fails the sub-call the same way with ``str(exc)``
    (a :class:`toolray.HarnessError` gives its ``message``), so the program always sees the
    failure message only (C-CODE-5).
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class Binding(Protocol):
    """One tool as a program sees it: ``await binding(args) -> value``.

    ``args`` is a fresh lossless-JSON mapping (C-CODE-11); the returned value must be
    lossless JSON too. Raise :class:`BindingError` (or any ``Exception``) to fail the call.

    A binding may carry ``parameter_names`` (a sequence of ``str``): the program's
    positional arguments then map onto those names in order, so ``await search("x")``
    works like ``await search(query="x")``.
    """

    async def __call__(self, args: Mapping[str, JsonValue], /) -> JsonValue: ...


@runtime_checkable
class CodeRuntime(Protocol):
    """The seam ``run_code`` runs programs through.

    ``run`` returns the outcome of a program that settled normally, and raises
    ``CodeRunFailedError`` (see :func:`code_run_failed`) for a failed program,
    ``ToolTimeoutError`` past its deadline and ``AbortError`` when ``signal`` fires.
    """

    @property
    def language(self) -> str:
        """The program language, e.g. ``"python"`` (it picks the prompt renderer)."""
        ...

    async def run(
        self, program: str, bindings: Mapping[str, Binding], signal: AbortSignal
    ) -> CodeRunOutcome:
        """Run ``program`` with ``bindings`` as its tools until it settles or ``signal`` fires."""
        ...
