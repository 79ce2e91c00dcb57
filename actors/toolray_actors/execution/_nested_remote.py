"""Nested dispatch from a worker: the body's ``ctx.dispatch`` asks its executor actor.

A worker never runs a nested call's pipeline itself (it holds no registry, no hooks, no
guards). Its run context's dispatcher sends ``(token id, name, arguments, call_id)`` to the
executor actor that issued the calling execution (named in the call's ``ident``); the
executor maps the id back to the live execution and runs the nested call through its
scope's full pipeline, bodies on workers again. Arguments that are not lossless JSON
travel as a marker the pipeline rejects (P-ARGS-4), so they are the nested call's failure,
as in-process; lossless ones travel as the plain values their JSON text reads back as, so
no object a body made (a frozen container it filled by hand, say) reaches the executor.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol, final

import ray
import ray.exceptions as rex

from toolray import AbortSignal, ToolExecutionResult, ToolRunContext
from toolray.isolation import (
    NestedAnswer,
    NestedRequest,
    context_from_ident,
    rebuild_error,
    refuse_in_loop,
)
from toolray.lowlevel import InvalidArguments
from toolray_actors._remote import Handle, get, lookup, retrying, retrying_sync, send
from toolray_actors._wire import NOT_JSON_ARGUMENTS, ExecutorHome, shippable_arguments

__all__ = ("RemoteNested", "nested_call", "worker_context")

_MAX_HANDLES = 256
"""Executor handles cached per worker (least recently used go first: scopes come and go)."""

_handles: OrderedDict[ExecutorHome, Handle] = OrderedDict()
_lock = threading.Lock()


def _executor(home: ExecutorHome) -> Handle:
    with _lock:
        handle = _handles.get(home)
        if handle is not None:
            _handles.move_to_end(home)
    if handle is None:
        handle = lookup(home.name, home.namespace)
        if handle is None:
            raise ValueError(f"nested dispatch rejected: the executor actor {home.name!r} is gone")
        with _lock:
            _handles[home] = handle
            if len(_handles) > _MAX_HANDLES:
                _handles.popitem(last=False)
    return handle


def _forget(home: ExecutorHome) -> None:
    with _lock:
        _handles.pop(home, None)  # a recreated executor gets the name: look it up again


_RETRIES = (0.0,)
"""A cached handle may name an executor that was reaped and recreated under the same name:
one retry with a fresh lookup. Safe: a new executor never accepts a parent it did not
issue, so a request that did reach the dead one is rejected, never run twice."""


class NestedHost(Protocol):
    """What a worker's body asks of its executor actor (whose class imports this module)."""

    async def dispatch_nested(
        self, token_id: str, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """A nested call for the live execution ``token_id`` names."""
        ...


@final
class RemoteNested:
    """The ``NestedDispatcher`` of a worker's run context."""

    __slots__ = ("_home",)

    def __init__(self, home: ExecutorHome) -> None:
        self._home = home

    @property
    def _what(self) -> str:
        return f"the executor actor {self._home.name!r}"

    def _send(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ray.ObjectRef[ToolExecutionResult]:
        handle = _executor(self._home)
        return send(
            handle,
            NestedHost.dispatch_nested,
            ctx.token.id,
            name,
            _plain(shippable_arguments(arguments)),
            call_id,
        )

    async def dispatch(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """Run the nested call in the executor actor; returns its result."""

        async def attempt() -> ToolExecutionResult:
            try:
                return await self._send(ctx, name, arguments, call_id)
            except rex.RayError:
                _forget(self._home)
                raise

        return await retrying(attempt, self._what, _RETRIES)

    def dispatch_sync(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """:meth:`dispatch` from a sync body's thread."""
        refuse_in_loop("the worker's")

        def attempt() -> ToolExecutionResult:
            try:
                return get(self._send(ctx, name, arguments, call_id))
            except rex.RayError:
                _forget(self._home)
                raise

        return retrying_sync(attempt, self._what, _RETRIES)


def _plain(arguments: object) -> object:
    """Lossless JSON as the plain values its text reads back as (anything else as it is)."""
    if type(arguments) is InvalidArguments or arguments is NOT_JSON_ARGUMENTS:
        return arguments
    try:
        text = json.dumps(arguments, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):  # it only passed for lossless JSON
        return NOT_JSON_ARGUMENTS
    return json.loads(text)


def worker_context(signal: AbortSignal, ident: dict[str, Any]) -> ToolRunContext:
    """The run context of a body on a worker: the call's identity, tokens by id, dispatch."""
    home = ExecutorHome.of(ident.get("home"))
    dispatcher = RemoteNested(home) if home is not None else None
    return context_from_ident(signal, ident, dispatcher)


async def nested_call(ident: Mapping[str, Any], request: NestedRequest) -> NestedAnswer:
    """A call process's ``ctx.dispatch``, asked of the call's executor actor.

    The request names its calling execution by token id, as a body in this process would:
    the executor accepts only a live execution it issued.
    """
    ctx = worker_context(AbortSignal(), {**ident, "token": request.token})
    home = ExecutorHome.of(ident.get("home"))
    if home is None:
        raise ValueError(
            "this run context cannot dispatch nested calls (a toolray pipeline did not make it)"
        )
    arguments: object = request.arguments
    if request.invalid is not None:  # looking at them raised in the call's process
        arguments = InvalidArguments(error=_exception(rebuild_error(request.invalid)))
    elif request.not_json:
        arguments = NOT_JSON_ARGUMENTS  # the pipeline rejects it as it rejects the value
    result = await RemoteNested(home).dispatch(ctx, request.name, arguments, request.call_id)
    return NestedAnswer(id=request.id, result=result)


def _exception(err: BaseException) -> Exception:
    return err if isinstance(err, Exception) else RuntimeError(str(err))
