"""The error tree of toolray.

Every exception toolray raises on purpose is a :class:`ToolrayError`. Every coded error is
a :class:`HarnessError`; its ``code`` is stable and unique, and it pickles with its fields
intact (a result crossing a process keeps its error)::

    Exception
    └── ToolrayError                          the base of everything toolray raises on purpose
        ├── HarnessError                      code given by the raiser
        │   ├── JsonSchemaError               UNSUPPORTED_SCHEMA   (.violations)
        │   ├── ToolArgsError                 INVALID_ARGS         (.violations)
        │   ├── ToolOutputError               INVALID_TOOL_OUTPUT  (.violations)
        │   ├── ToolNotFoundError             UNKNOWN_TOOL
        │   ├── AbortError                    ABORTED | ABORTED_BEFORE_DISPATCH
        │   ├── ToolTimeoutError              TOOL_TIMEOUT
        │   ├── NotJsonError                  NOT_JSON             (.path)
        │   ├── ToolWorkerLostError           WORKER_LOST
        │   ├── ExecutorUnavailableError      EXECUTOR_UNAVAILABLE
        │   ├── ExecutorLostError             EXECUTOR_LOST
        │   ├── CodeRunFailedError            CODE_RUN_FAILED
        │   ├── RateLimitedError              RATE_LIMITED
        │   ├── ResultTooLargeError           RESULT_TOO_LARGE
        │   ├── EnvironmentLostError          ENVIRONMENT_LOST
        │   ├── EnvironmentFailedError        ENVIRONMENT_FAILED
        │   ├── UnknownEnvironmentError       UNKNOWN_ENVIRONMENT
        │   ├── DeadlineExceededError         DEADLINE_EXCEEDED
        │   └── OverloadedError               OVERLOADED
        ├── ToolBatchExecutionError           a scheduler failure (not a tool outcome)
        └── SandboxUnavailableError           a required confinement layer is missing

Every code has one fault class (``"input"``, ``"policy"``, ``"tool"``, ``"infra"``,
``"cancelled"``) in :data:`toolray.FAULT_CLASSES`; a failure carries it as ``error.fault``.

The Ray layer adds three more, each a ``ToolrayError``: ``RuntimeUnavailableError`` (a
``HarnessError``), ``ConfigError`` (also a ``ValueError``) and ``StartError`` (also a
``RuntimeError``).

Misuse of the registry API raises plain ``TypeError`` / ``ValueError`` with a message that
names the misuse (R-REG).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

__all__ = (
    "TOOL_ABORTED",
    "TOOL_ABORTED_BEFORE_DISPATCH",
    "TOOL_TIMEOUT",
    "AbortError",
    "CodeRunFailedError",
    "DeadlineExceededError",
    "EnvironmentFailedError",
    "EnvironmentLostError",
    "ExecutorLostError",
    "ExecutorUnavailableError",
    "HarnessError",
    "JsonSchemaError",
    "NotJsonError",
    "OverloadedError",
    "RateLimitedError",
    "ResultTooLargeError",
    "SandboxUnavailableError",
    "ToolArgsError",
    "ToolBatchExecutionError",
    "ToolNotFoundError",
    "ToolOutputError",
    "ToolTimeoutError",
    "ToolWorkerLostError",
    "ToolrayError",
    "UnknownEnvironmentError",
)

TOOL_ABORTED = "ABORTED"
TOOL_ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"
TOOL_TIMEOUT = "TOOL_TIMEOUT"


class ToolrayError(Exception):
    """The base of every exception toolray raises on purpose (``except ToolrayError``)."""


class HarnessError(ToolrayError):
    """A coded error: ``.code`` is machine-readable, ``.message`` is what a model reads.

    Example:
        >>> err = HarnessError("disk full", "ENOSPC")
        >>> (err.name, err.code, err.message)
        ('HarnessError', 'ENOSPC', 'disk full')
    """

    default_code: ClassVar[str] = "HARNESS_ERROR"
    reason: str | None = None
    """Optional user-facing detail; it reaches ``info.reason``, never the model's text."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else type(self).default_code

    @property
    def name(self) -> str:
        """The class name (what JavaScript calls ``error.name``)."""
        return type(self).__name__

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), dict(self.__dict__)))


def _rebuild(cls: type[BaseException], state: dict[str, Any]) -> BaseException:
    err = cls.__new__(cls)
    Exception.__init__(err, state.get("message", ""))
    err.__dict__.update(state)
    return err


class _ViolationsError(HarnessError):
    prefix: ClassVar[str] = ""

    def __init__(self, violations: Iterable[str], code: str | None = None) -> None:
        self.violations: tuple[str, ...] = tuple(violations)
        super().__init__(self.prefix + "; ".join(self.violations), code)


class JsonSchemaError(_ViolationsError):
    """A schema outside the enforced subset (or a bad DSL spec)."""

    default_code = "UNSUPPORTED_SCHEMA"
    prefix = "unsupported JSON schema: "


class ToolArgsError(_ViolationsError):
    """Arguments that violate a ``define_tool`` parameter schema."""

    default_code = "INVALID_ARGS"
    prefix = "invalid arguments: "


class ToolOutputError(HarnessError):
    """A body value, render or presentation projection that breaks the output contract."""

    default_code = "INVALID_TOOL_OUTPUT"

    def __init__(self, tool_name: str, violations: Sequence[str], code: str | None = None) -> None:
        self.tool_name = tool_name
        self.violations: tuple[str, ...] = tuple(violations)
        message = f'tool "{tool_name}" returned invalid output: ' + "; ".join(self.violations)
        super().__init__(message, code)


class ToolNotFoundError(HarnessError):
    """The name is not visible to the caller's scope."""

    default_code = "UNKNOWN_TOOL"

    def __init__(self, tool_name: str, message: str | None = None) -> None:
        self.tool_name = tool_name
        super().__init__(message if message is not None else f'unknown tool "{tool_name}"')


class AbortError(HarnessError):
    """Cooperative cancellation: ``ABORTED`` (body ran) or ``ABORTED_BEFORE_DISPATCH``."""

    default_code = TOOL_ABORTED

    def __init__(self, message: str = "tool call aborted", code: str | None = None) -> None:
        super().__init__(message, code)


class ToolTimeoutError(HarnessError):
    """The timeout policy's own deadline fired first."""

    default_code = TOOL_TIMEOUT


class NotJsonError(HarnessError):
    """A value that is not lossless JSON; ``.path`` names the first offending place."""

    default_code = "NOT_JSON"

    def __init__(self, message: str, path: str = "value", code: str | None = None) -> None:
        self.path = path
        super().__init__(message, code)


class ToolWorkerLostError(HarnessError):
    """A worker process died under a call that the runtime did not kill itself."""

    default_code = "WORKER_LOST"


class ExecutorUnavailableError(HarnessError):
    """No batch executor is selected for the scope (nor a deployment default)."""

    default_code = "EXECUTOR_UNAVAILABLE"


class ExecutorLostError(HarnessError):
    """The executor actor died under a batch: the failure of every call it had not committed.

    The calls committed before the death keep their results.
    """

    default_code = "EXECUTOR_LOST"


class CodeRunFailedError(HarnessError):
    """A ``run_code`` program failed."""

    default_code = "CODE_RUN_FAILED"


class RateLimitedError(HarnessError):
    """A call waited longer than its rate limit's ``max_wait_ms``; its body never started."""

    default_code = "RATE_LIMITED"


class ResultTooLargeError(HarnessError):
    """A body's value is larger than ``max_result_bytes`` as lossless JSON text."""

    default_code = "RESULT_TOO_LARGE"


class EnvironmentLostError(HarnessError):
    """An environment instance's process died (or its state could not come back).

    Every later use of the instance fails the same way until ``open()`` makes a new one:
    an instance is never re-created silently with a state the agent did not build.
    """

    default_code = "ENVIRONMENT_LOST"


class EnvironmentFailedError(HarnessError):
    """An environment's own code failed: ``create`` (or ``restore``, a fork) raised.

    Nothing is left open; the message carries the cause's.
    """

    default_code = "ENVIRONMENT_FAILED"


class UnknownEnvironmentError(HarnessError):
    """No environment of that name is registered where the scope can see it."""

    default_code = "UNKNOWN_ENVIRONMENT"

    def __init__(self, environment: str, message: str | None = None) -> None:
        self.environment = environment
        text = message if message is not None else f'unknown environment "{environment}"'
        super().__init__(text)


class DeadlineExceededError(HarnessError):
    """The batch's ``deadline_s`` passed before the call ended (fault ``"cancelled"``).

    A call not started by then never runs; a running one got the cancellation ladder.
    """

    default_code = "DEADLINE_EXCEEDED"


class OverloadedError(HarnessError):
    """No capacity for the call within its pool's ``max_queue_ms``; its body never ran."""

    default_code = "OVERLOADED"


class ToolBatchExecutionError(ToolrayError):
    """A batch scheduler failure, raised only after every started call has settled.

    ``results`` holds the outcomes committed before the failure (model order, possibly fewer
    than the calls) and ``additional_contexts`` the contexts accepted so far.
    """

    def __init__(
        self,
        message: str,
        *,
        results: tuple[Any, ...] = (),
        additional_contexts: tuple[Any, ...] = (),
    ) -> None:
        super().__init__(message)
        self.message = message
        self.results = results
        self.additional_contexts = additional_contexts

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), dict(self.__dict__)))


class SandboxUnavailableError(ToolrayError):
    """``confinement="strict"`` asked for a layer this host cannot give.

    ``missing`` holds one ``"<layer>: <reason>"`` per layer that is not available.
    """

    def __init__(self, missing: Iterable[str]) -> None:
        self.missing: tuple[str, ...] = tuple(missing)
        super().__init__("sandbox unavailable: " + "; ".join(self.missing))
        self.message = str(self.args[0])

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), dict(self.__dict__)))
