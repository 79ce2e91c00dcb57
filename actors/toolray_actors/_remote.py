"""The typed remote call: an actor's method named by the method itself, never by a string.

``send(handle, RegistryActor.apply, op)`` is ``handle.apply.remote(op)`` that mypy checks: the
method exists on the actor class, the arguments fit it, the result has its type. ``stream``
is the same for an async generator method (Ray's ``num_returns="streaming"``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import ray

__all__ = ("send", "stream")

_A = TypeVar("_A")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def send(
    handle: Any,
    method: Callable[Concatenate[_A, _P], Coroutine[Any, Any, _R]],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> ray.ObjectRef[_R]:
    """Call ``method`` of the actor behind ``handle``; the reference to its result.

    ``method`` is the actor class's own method (``RegistryActor.apply``), never its name: mypy
    checks the method, its arguments and its result at every call site.
    """
    remote = getattr(handle, method.__name__).remote
    return cast("ray.ObjectRef[_R]", remote(*args, **kwargs))


def stream(
    handle: Any,
    method: Callable[Concatenate[_A, _P], AsyncIterator[_R]],
    /,
    *args: _P.args,
    **kwargs: _P.kwargs,
) -> AsyncIterator[ray.ObjectRef[_R]]:
    """Call the async generator ``method`` of the actor; its items' references as they come.

    The streaming counterpart of :func:`send` (Ray's ``num_returns="streaming"``).
    """
    remote = getattr(handle, method.__name__).options(num_returns="streaming").remote
    return cast("AsyncIterator[ray.ObjectRef[_R]]", remote(*args, **kwargs))
