"""The one Ray boundary of a call: send, wait, look up, retry on actor death, translate.

``send(handle, RegistryActor.apply, op)`` is ``handle.apply.remote(op)`` that mypy checks: the
method exists on the actor class, the arguments fit it, the result has its type. ``stream``
is the same for an async generator method (Ray's ``num_returns="streaming"``). ``get`` waits
for a reference from a thread, ``lookup`` finds a named actor, and ``retrying`` /
``retrying_sync`` run an attempt again after its actor died (where a call site says that is
safe), translating every other Ray error (``toolray_actors._errors.translate``). Only this
module and ``_handles`` (which applies Ray to actor classes) call Ray's ``get``, ``wait``,
``get_actor`` or ``num_returns`` (the architecture test checks it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Concatenate, ParamSpec, TypeAlias, TypeVar, cast

import ray
import ray.exceptions as rex

from ._errors import is_actor_death, translate

__all__ = (
    "Handle",
    "actor_id",
    "actor_name",
    "anchor",
    "freeze",
    "get",
    "job_id",
    "known_dead",
    "lookup",
    "node_id",
    "owner_alive",
    "put",
    "retrying",
    "retrying_sync",
    "send",
    "stream",
    "thaw",
)

_DEAD = 4
"""``ActorTableData.DEAD``: the state of an actor that will not answer again."""

Handle: TypeAlias = "ray.actor.ActorHandle[object]"
"""A handle on one of toolray's actors (its class is the method :func:`send` is given)."""

_A = TypeVar("_A")
_P = ParamSpec("_P")
_R = TypeVar("_R")


def send(
    handle: Handle,
    method: Callable[Concatenate[_A, _P], Coroutine[object, object, _R]],
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
    handle: Handle,
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


def get(ref: ray.ObjectRef[_R]) -> _R:
    """Wait for ``ref``'s value (blocking: a script's thread, never a running loop)."""
    value: _R = ray.get(ref)
    return value


def put(data: bytes) -> ray.ObjectRef[bytes]:
    """``data`` in the object store, owned by this process (a parked instance's snapshot)."""
    return ray.put(data)


def anchor() -> ray.ObjectRef[int]:
    """A small object this process owns: it is lost (``OwnerDiedError``) when the process is."""
    return ray.put(0)


def freeze(refs: list[object] | None) -> bytes:
    """``refs[0]`` serialized out of band (Ray then keeps its object while its owner lives).

    ``b""`` without one; :func:`thaw` makes the ref again, in this or a later process.
    """
    dumps: Callable[[object], bytes] = ray.cloudpickle.dumps
    for ref in refs or ():
        return dumps(ref)
    return b""


def thaw(blob: bytes) -> object:
    """The object ref :func:`freeze` serialized (in this or a later process)."""
    ref: object = ray.cloudpickle.loads(blob)
    return ref


async def owner_alive(ref: object, timeout_s: float) -> bool:
    """Whether the process owning ``ref`` (an :func:`anchor`) lives; ``True`` if unsure."""
    future = cast("ray.ObjectRef[int]", ref).future()
    try:
        await asyncio.wait_for(asyncio.wrap_future(future), timeout_s)
    except rex.OwnerDiedError:
        return False
    except Exception:  # slow, or another failure: no evidence of a death
        return True
    return True


def lookup(name: str, namespace: str) -> Handle | None:
    """The handle of the named actor ``name`` in ``namespace``, or ``None``."""
    try:
        return ray.get_actor(name, namespace=namespace)
    except ValueError:
        return None


def node_id() -> str:
    """The id of the node this process runs on."""
    return str(ray.get_runtime_context().get_node_id())


def known_dead(handle: Handle) -> bool:
    """Whether this process already knows the actor behind ``handle`` died (no message sent).

    Ray tells every process that sent an actor calls of the actor's death within
    milliseconds; a handle kept for a while (an executor reaped since) is then known dead.
    """
    try:
        return bool(handle._get_local_state() == _DEAD)  # type: ignore[no-untyped-call]
    except Exception:  # not connected, or a handle without local state: not known
        return False


def job_id() -> str:
    """The id of this process's Ray job."""
    return str(ray.get_runtime_context().get_job_id())


def actor_id() -> str:
    """The id of the actor this process hosts (``""`` if none)."""
    return ray.get_runtime_context().get_actor_id() or ""


def actor_name() -> str:
    """The name of the actor this process hosts (``""`` if none)."""
    return ray.get_runtime_context().get_actor_name() or ""


def _nothing() -> None:
    return None


def _pause_after(err: rex.RayError, pauses: Iterator[float], what: str) -> float:
    """How long to wait before the next attempt after ``err``; raises ours if none is due.

    Only an actor's death is retried, and only while ``pauses`` has a pause left.
    """
    pause = next(pauses, None)
    if not is_actor_death(err) or pause is None:
        raise translate(err, what) from None
    return pause


async def retrying(
    attempt: Callable[[], Awaitable[_R]],
    what: str,
    pauses: Iterable[float],
    *,
    recover: Callable[[], object] = _nothing,
) -> _R:
    """``await attempt()``; after its actor died, ``recover()``, pause and try again.

    One attempt more than ``pauses`` has pauses (a pause of 0 does not sleep). Any other
    Ray error, or a death after the last attempt, raises ours for ``what`` (see
    ``translate``). Only for attempts that are safe to repeat: nothing started, or a new
    actor that refuses what the dead one accepted.
    """
    waits = iter(pauses)
    while True:
        try:
            return await attempt()
        except rex.RayError as err:
            pause = _pause_after(err, waits, what)
        recover()
        if pause > 0:
            await asyncio.sleep(pause)


def retrying_sync(
    attempt: Callable[[], _R],
    what: str,
    pauses: Iterable[float],
    *,
    recover: Callable[[], object] = _nothing,
) -> _R:
    """:func:`retrying` for a blocking ``attempt`` (one that waits with :func:`get`)."""
    waits = iter(pauses)
    while True:
        try:
            return attempt()
        except rex.RayError as err:
            pause = _pause_after(err, waits, what)
        recover()
        if pause > 0:
            time.sleep(pause)
