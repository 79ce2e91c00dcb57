"""What one body's run comes to, as it crosses back to the executor, and errors that travel.

A :class:`CallOutcome` is the named record a worker returns for one call, whether the body
ran in the worker itself (``"shared"`` isolation) or in a call's own process (``"call"``).
Errors cross pickled (cloudpickle, as Ray ships them); one that would not survive the trip
is replaced by a faithful stand-in (:func:`shippable_error`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import cloudpickle

from toolray import AbortError, HarnessError, UserMessage

__all__ = (
    "CallOutcome",
    "OutcomeStatus",
    "RemoteHarnessError",
    "ToolInterrupted",
    "shippable_error",
)

OutcomeStatus = Literal["ok", "error", "not_json", "missing", "lost", "killed", "retired"]
"""``ok``: ``value`` is the body's value (lossless JSON). ``error``: the body raised
``error``. ``not_json``: the body returned a value that is not lossless JSON. ``missing``:
the worker holds no definition for the call's key and none came with it. ``lost``: the
call's process died under it (``detail`` says how). ``killed``: the call's process was
killed on request (the last step of the cancellation ladder). ``retired``: the worker is
leaving its elastic pool and did not start the call (its executor sends it elsewhere)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    """One call's outcome: its status, value or error, and what the body deferred."""

    status: OutcomeStatus
    value: Any = None
    error: BaseException | None = None
    contexts: tuple[UserMessage, ...] = ()
    concludes: bool = False
    detail: str = ""
    """For ``lost`` / ``killed``: how the call's process ended, in words."""

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # one positional call back: a dataclass's default pickling looks its fields up for
        # every outcome, several times slower on a worker's hot path (a chunk per tick)
        fields = (self.status, self.value, self.error, self.contexts, self.concludes)
        return _call_outcome, (*fields, self.detail)


def _call_outcome(
    status: OutcomeStatus,
    value: Any,
    error: BaseException | None,
    contexts: tuple[UserMessage, ...],
    concludes: bool,
    detail: str,
) -> CallOutcome:
    return CallOutcome(
        status=status,
        value=value,
        error=error,
        contexts=contexts,
        concludes=concludes,
        detail=detail,
    )


MISSING = CallOutcome(status="missing")


class ToolInterrupted(AbortError):
    """Injected into a sync body's thread when cooperation did not stop it."""

    def __init__(self) -> None:
        super().__init__("tool call aborted")
        self.reason = "the worker interrupted the tool's thread"


class RemoteHarnessError(HarnessError):
    """Stands in for a coded error whose own class cannot travel; keeps its name and code."""

    def __init__(self, message: str, code: str, name: str) -> None:
        super().__init__(message, code)
        self.original_name = name

    @property
    def name(self) -> str:
        """The raised error's class name (the ``info.name`` the executor reports)."""
        return self.original_name


def shippable_error(exc: BaseException) -> BaseException:
    """``exc`` if it survives the trip to another process (cloudpickle), else a stand-in."""
    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        if isinstance(exc, HarnessError):
            stand_in = RemoteHarnessError(exc.message, exc.code, exc.name)
            stand_in.reason = exc.reason
            return stand_in
        return RuntimeError(str(exc) or type(exc).__name__)
    return exc


def aborted(reason: str) -> AbortError:
    """The ``AbortError`` of a call stopped by the worker, with ``reason``."""
    stopped = AbortError("tool call aborted")
    stopped.reason = reason
    return stopped
