"""Nested dispatch from a worker: the body's ``ctx.dispatch`` asks its executor actor.

A worker never runs a nested call's pipeline itself (it holds no registry, no hooks, no
guards). Its run context's dispatcher sends ``(token id, name, arguments, call_id)`` to the
executor actor that issued the calling execution (named in the call's ``ident``); the
executor maps the id back to the live execution and runs the nested call through its
scope's full pipeline, bodies on workers again. Arguments that are not lossless JSON
travel as a marker the pipeline rejects (P-ARGS-4), so they are the nested call's failure,
as in-process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, final

import ray
import ray.exceptions as rex

from toolray import AbortSignal, ToolExecutionResult, ToolRunContext
from toolray.isolation import context_from_ident, refuse_in_loop
from toolray_actors._errors import is_actor_death, translate
from toolray_actors._wire import shippable_arguments

__all__ = ("RemoteNested", "worker_context")

_MAX_HANDLES = 256
"""Executor handles cached per worker (least recently used go first: scopes come and go)."""

_handles: OrderedDict[tuple[str, str], Any] = OrderedDict()
_lock = threading.Lock()


def _executor(home: tuple[str, str]) -> Any:
    with _lock:
        handle = _handles.get(home)
        if handle is not None:
            _handles.move_to_end(home)
    if handle is None:
        try:  # not ``_handles.get_named``: the worker actor class lives there (no cycle)
            handle = ray.get_actor(home[0], namespace=home[1])
        except ValueError:
            raise ValueError(
                f"nested dispatch rejected: the executor actor {home[0]!r} is gone"
            ) from None
        with _lock:
            _handles[home] = handle
            if len(_handles) > _MAX_HANDLES:
                _handles.popitem(last=False)
    return handle


def _forget(home: tuple[str, str], err: BaseException) -> BaseException:
    with _lock:
        _handles.pop(home, None)  # a recreated executor gets the name: look it up again
    return translate(err, f"the executor actor {home[0]!r}")


_ATTEMPTS = 2
"""A cached handle may name an executor that was reaped and recreated under the same name:
one retry with a fresh lookup. Safe: a new executor never accepts a parent it did not
issue, so a request that did reach the dead one is rejected, never run twice."""


@final
class RemoteNested:
    """The ``NestedDispatcher`` of a worker's run context."""

    __slots__ = ("_home",)

    def __init__(self, home: tuple[str, str]) -> None:
        self._home = home

    def _send(self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None) -> Any:
        handle = _executor(self._home)
        return handle.dispatch_nested.remote(
            ctx.token.id, name, shippable_arguments(arguments), call_id
        )

    async def dispatch(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """Run the nested call in the executor actor; returns its result."""
        for attempt in range(_ATTEMPTS):
            try:
                return await self._send(ctx, name, arguments, call_id)  # type: ignore[no-any-return]
            except rex.RayError as err:
                failure = _forget(self._home, err)
                if not is_actor_death(err) or attempt == _ATTEMPTS - 1:
                    raise failure from None
        raise AssertionError("unreachable")

    def dispatch_sync(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """:meth:`dispatch` from a sync body's thread."""
        refuse_in_loop("the worker's")
        for attempt in range(_ATTEMPTS):
            try:
                return ray.get(self._send(ctx, name, arguments, call_id))  # type: ignore[no-any-return]
            except rex.RayError as err:
                failure = _forget(self._home, err)
                if not is_actor_death(err) or attempt == _ATTEMPTS - 1:
                    raise failure from None
        raise AssertionError("unreachable")


def worker_context(signal: AbortSignal, ident: dict[str, Any]) -> ToolRunContext:
    """The run context of a body on a worker: the call's identity, tokens by id, dispatch."""
    home = ident.get("home")
    dispatcher = RemoteNested(tuple(home)) if home and home[0] else None
    return context_from_ident(signal, ident, dispatcher)
