"""The one boundary that turns Ray's exceptions into ours; the core never sees a Ray type."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import cloudpickle
import ray.exceptions as rex

__all__ = (
    "is_actor_death",
    "is_cancelled",
    "task_cause",
    "translate_remote_errors",
    "wire_reason",
)


def wire_reason(reason: Any) -> Any:
    """An abort reason that can cross to another process: itself, or its text."""
    try:
        cloudpickle.dumps(reason)
    except Exception:
        return str(reason)
    return reason


def task_cause(err: BaseException) -> BaseException:
    """The user-level exception inside a ``RayTaskError`` (or ``err`` itself)."""
    if isinstance(err, rex.RayTaskError):
        cause = getattr(err, "cause", None)
        if isinstance(cause, BaseException):
            return cause
        try:
            return err.as_instanceof_cause()
        except Exception:
            return RuntimeError(str(err))
    return err


def is_actor_death(err: BaseException) -> bool:
    """Whether ``err`` says the actor process is gone (or unreachable)."""
    return isinstance(err, rex.RayActorError | rex.WorkerCrashedError | rex.NodeDiedError)


def is_cancelled(err: BaseException) -> bool:
    """Whether ``err`` is Ray's "the task was cancelled"."""
    return isinstance(err, rex.TaskCancelledError)


@contextmanager
def translate_remote_errors() -> Iterator[None]:
    """Re-raise a remote method's own exception (a ``RayTaskError``'s cause) unwrapped."""
    try:
        yield
    except rex.RayTaskError as err:
        raise task_cause(err) from None
