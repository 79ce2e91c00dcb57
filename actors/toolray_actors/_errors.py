"""The one boundary that turns Ray's exceptions into ours; no Ray type reaches a user.

Every public call of ``toolray_actors`` runs its Ray interaction inside
:func:`ray_boundary` (or maps errors with :func:`translate`), so what escapes is only:
toolray's ``HarnessError`` subclasses, ``ToolBatchExecutionError``, ``StartError``,
``ConfigError``, ``ValueError`` / ``TypeError`` for misuse, and ``asyncio.CancelledError``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import cloudpickle
import ray.exceptions as rex

from toolray.errors import EnvironmentLostError, HarnessError, ToolrayError

__all__ = (
    "ExecutorRetiringError",
    "RuntimeUnavailableError",
    "WireRecordError",
    "env_lost",
    "is_actor_death",
    "is_cancelled",
    "is_dead_actor",
    "is_ray_error",
    "is_retiring",
    "namespace_ended",
    "ray_boundary",
    "task_cause",
    "translate",
    "wire_reason",
)


class RuntimeUnavailableError(HarnessError):
    """The namespace's runtime actors are gone (torn down, or unreachable).

    The message says what happened and how to recover (usually: ``RayRuntime.start()``
    again, which recreates the namespace from its persisted state).
    """

    default_code = "RUNTIME_UNAVAILABLE"


class WireRecordError(ToolrayError, TypeError):
    """A record on the Ray wire that its reader does not know: a bug, never ignored."""


class ExecutorRetiringError(Exception):
    """An idle executor actor, exiting, refused a request: nothing of it started there.

    It held no environment instance (else it would not have retired), so the driver asks
    the scope's next executor instead of reporting an instance lost.
    """


def namespace_ended(namespace: str, why: str | None) -> RuntimeUnavailableError:
    """The error of a call into a namespace whose registry actor is gone: why, if known."""
    if why:
        return RuntimeUnavailableError(
            f"the toolray namespace {namespace!r} ended: {why}; RayRuntime.start() creates it anew"
        )
    return RuntimeUnavailableError(
        f"the toolray registry actor of namespace {namespace!r} is not running; "
        "RayRuntime.start() recreates it"
    )


def wire_reason(reason: object) -> object:
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
            unwrapped: BaseException = err.as_instanceof_cause()  # type: ignore[no-untyped-call]
            return unwrapped
        except Exception:
            return RuntimeError(str(err))
    return err


def is_actor_death(err: BaseException) -> bool:
    """Whether ``err`` (or the cause it wraps) says the actor process is gone."""
    err = task_cause(err)
    return isinstance(
        err,
        rex.RayActorError
        | rex.WorkerCrashedError
        | rex.NodeDiedError
        | rex.OwnerDiedError
        | rex.ObjectLostError,
    )


def is_retiring(err: BaseException) -> bool:
    """Whether ``err`` is an exiting executor's refusal (:class:`ExecutorRetiringError`)."""
    return isinstance(task_cause(err), ExecutorRetiringError)


def env_lost(exiting: bool, what: str) -> Exception:
    """What an environment request raises when ``what`` died under it or, exiting, refused it.

    A death loses the instances the actor held (``EnvironmentLostError``); an actor that
    was exiting (it refused a request: :class:`ExecutorRetiringError`) held none, and the
    request is asked again of the next actor.
    """
    if exiting:
        return ExecutorRetiringError(what)
    return EnvironmentLostError(f"{what} died holding the instance")


def is_dead_actor(err: BaseException) -> bool:
    """Whether ``err`` says the actor died for good (not merely unreachable for a while)."""
    return isinstance(task_cause(err), rex.ActorDiedError)


def is_cancelled(err: BaseException) -> bool:
    """Whether ``err`` is Ray's "the task was cancelled"."""
    return isinstance(err, rex.TaskCancelledError)


def is_ray_error(err: BaseException) -> bool:
    """Whether ``err`` is a Ray type (which must never reach a user)."""
    return type(err).__module__.startswith("ray")


def translate(err: BaseException, what: str) -> BaseException:
    """Ours for ``err``: a remote method's own exception unwrapped, or a clear HarnessError.

    ``what`` names the actor (e.g. ``"the registry actor of namespace 'x'"``) for the
    message of a lost actor.
    """
    cause = task_cause(err)
    if not is_ray_error(cause) and not isinstance(cause, rex.RayError):
        return cause
    if is_actor_death(cause):
        return RuntimeUnavailableError(
            f"{what} is gone ({type(cause).__name__}); RayRuntime.start() recreates it "
            "from the namespace's persisted state"
        )
    if isinstance(cause, rex.GetTimeoutError | TimeoutError):
        return RuntimeUnavailableError(f"{what} did not answer in time")
    return RuntimeUnavailableError(f"{what} failed: {type(cause).__name__}: {cause}")


@contextmanager
def ray_boundary(what: str) -> Iterator[None]:
    """Re-raise anything Ray raises inside the block as one of ours (see :func:`translate`)."""
    try:
        yield
    except (rex.RayError, rex.RayTaskError) as err:
        raise translate(err, what) from None
