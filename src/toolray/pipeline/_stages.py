"""The per-call pipeline, as stages a scheduler can drive one by one.

``prepare`` (argument snapshot, collapse, pre-execute waterfall, approval, guards) →
``dispatch`` (around-dispatch waterfall + body; the only stage that overlaps others) →
``complete`` (post-execute when the outcome enters it, then ``finish``: materialize,
``finalize_content`` exactly once, freeze, result observers). Cancellation is sampled at the
fixed checkpoints of P-CANCEL-1 and only ever replaces a success.
"""

from __future__ import annotations

import asyncio
from typing import Any, final

from toolray._arguments import InvalidArguments
from toolray._context import ToolRunContext, not_live
from toolray._execution import (
    ExecutionToken,
    ToolDispatchExecution,
    ToolExecution,
    ToolExecutionInput,
)
from toolray._json import snapshot_json
from toolray._normalize import aborted, fail, failure_from, past_deadline, unknown_tool
from toolray._outcomes import ToolExecutionResult
from toolray._signals import AbortSignal
from toolray.errors import NotJsonError
from toolray.registry._lookup import ToolLookup

from ._call import Call
from ._dispatch import BodyRunner
from ._finish import finish, log_failure
from ._observe import Observation, end_call, start_call
from ._policy import run_post_execute, run_pre_execute
from ._retry import run_attempts

__all__ = (
    "ARGS_NOT_JSON",
    "LocalNested",
    "complete",
    "dispatch",
    "prepare",
    "run_nested",
    "run_pipeline",
)

ARGS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"


def _visible_definition(registry: ToolLookup, inp: ToolExecutionInput) -> Any:
    try:
        return registry.executable(inp.name, inp.scope, inp.tool_set)
    except Exception:
        return None


def _unusable_arguments(
    registry: ToolLookup,
    inp: ToolExecutionInput,
    token: ExecutionToken,
    result: ToolExecutionResult,
    finalizer: Any,
    project: Any,
) -> Call:
    """A call whose arguments cannot be snapshotted: ``result`` is final (P-ARGS-4/5)."""
    execution = ToolDispatchExecution(inp, None, token, registry)
    return Call(registry, inp, execution, finalizer, project).settle("final", result)


async def prepare(
    registry: ToolLookup, inp: ToolExecutionInput, within: Observation | None = None
) -> Call:
    """Snapshot the arguments and run every gate; returns where the call goes next.

    The call's observers (``within``: its batch's; see :func:`start_call`) hear of it first.
    """
    token = ExecutionToken()
    observed = start_call(inp, token, within)
    call = await _gate(registry, inp, token)
    call.observed = observed
    return call


async def _gate(registry: ToolLookup, inp: ToolExecutionInput, token: ExecutionToken) -> Call:
    visible = _visible_definition(registry, inp)
    finalizer = getattr(visible, "finalize_content", None)
    project = getattr(visible, "project_content", None)
    raw = inp.arguments
    if type(raw) is InvalidArguments:  # neither JSON text nor a mapping
        failure = failure_from(raw.error)
        return _unusable_arguments(registry, inp, token, failure, finalizer, project)
    try:
        arguments = snapshot_json(raw)
    except NotJsonError:
        failure = fail(ARGS_NOT_JSON, fault="input")
        return _unusable_arguments(registry, inp, token, failure, finalizer, project)
    except Exception as exc:  # a hostile value whose inspection raises
        failure = failure_from(exc, fault="input")
        return _unusable_arguments(registry, inp, token, failure, finalizer, project)
    execution = ToolDispatchExecution(inp, arguments, token, registry)
    call = Call(registry, inp, execution, finalizer, project, visible)
    caller = inp.signal
    if registry.is_collapsed(inp.name, inp.scope, inp.parent):
        if caller.aborted:
            return call.settle("final", aborted(False))
        call.finalizer = None  # P-FIN-3: a collapse that is not aborted never finalizes
        message = None
        if registry.get(inp.name, inp.scope, inp.tool_set) is not None:
            message = (
                f'unknown tool "{inp.name}": only `run_code` is callable directly — call '
                f"`{inp.name}` from inside a `run_code` program instead"
            )
        return call.settle("final", unknown_tool(inp.name, message))
    if caller.aborted:
        return call.settle("final", aborted(False))
    return await run_pre_execute(call)


async def dispatch(call: Call, runner: BodyRunner | None = None) -> Call:
    """Take a rate-limit token, run around-dispatch and the body; retry idempotent tools.

    Only for ``step == "dispatch"``; a retry policy runs the stage again for the failures
    it names (see ``pipeline/_retry.py``).
    """
    if call.step != "dispatch":
        return call
    await run_attempts(call, runner, LocalNested.for_call)
    call.in_time = not call.input.signal.aborted
    return call


async def complete(call: Call) -> ToolExecutionResult:
    """Post-execute (when the outcome enters it), then ``finish``; returns the final result.

    A call aborted because its batch's deadline passed ends ``DEADLINE_EXCEEDED`` here.
    """
    if call.step == "post":
        await run_post_execute(call)
    assert call.result is not None
    call.result = past_deadline(call.result, call.input.signal)
    result = finish(call)
    if call.observed is not None:
        end_call(call.observed, result)
    if result.is_error:
        log_failure(call.input, result, killed=bool(call.notes.get("killed")))
    return result


async def run_pipeline(
    registry: ToolLookup, inp: ToolExecutionInput, runner: BodyRunner | None = None
) -> ToolExecutionResult:
    """The whole pipeline for one call."""
    call = await prepare(registry, inp)
    await dispatch(call, runner)
    return await complete(call)


# ---------------------------------------------------------------------- nested calls
async def run_nested(
    registry: ToolLookup,
    parent: ToolExecution,
    name: str,
    arguments: Any,
    *,
    call_id: str,
    signal: AbortSignal | None = None,
    runner: BodyRunner | None = None,
) -> ToolExecutionResult:
    """Run a nested call of ``parent`` through the full pipeline of its scope.

    The nested call has ``parent`` = the parent execution's token and inherits its
    ``root_call_id``, scope and ``tool_set``; ``signal`` defaults to the parent's current
    signal (inside a body: the body's, so the caller's abort reaches the nested call).
    This is the one entry point behind ``ctx.dispatch`` in-process and in a Ray executor
    actor, and the one Code Mode bindings use (with their own ids and run signal).
    """
    inp = ToolExecutionInput(
        call_id,
        name,
        arguments,
        signal if signal is not None else parent.signal,
        root_call_id=parent.root_call_id,
        scope=parent.scope,
        tool_set=parent.tool_set,
        parent=parent.token,
    )
    return await run_pipeline(registry, inp, runner)


@final
class LocalNested:
    """The in-process :class:`~toolray._context.NestedDispatcher` of one body's context.

    Nested calls run on the loop that runs the calling body, through the same registry
    view and body runner (a Ray executor actor: its mirror and worker dispatch).
    """

    __slots__ = ("_loop", "_registry", "_runner")

    def __init__(
        self, registry: ToolLookup, runner: BodyRunner | None, loop: asyncio.AbstractEventLoop
    ) -> None:
        self._registry = registry
        self._runner = runner
        self._loop = loop

    @classmethod
    def for_call(cls, call: Call, runner: BodyRunner) -> LocalNested:
        """The dispatcher for the body of ``call`` (made on the running loop)."""
        return cls(call.registry, runner, asyncio.get_running_loop())

    async def dispatch(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """One nested call of ``ctx``'s execution (default id: ``<call id>:sub:<n>``)."""
        parent = ctx.execution
        if parent is None or ctx.settled:
            raise not_live(ctx.token.id if ctx.token is not None else ctx.call_id)
        sub_id = call_id if call_id is not None else ctx.next_sub_call_id()
        return await run_nested(
            self._registry,
            parent,
            name,
            arguments,
            call_id=sub_id,
            signal=ctx.signal,
            runner=self._runner,
        )

    def dispatch_sync(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """:meth:`dispatch` from a body's thread (never from the loop it would block)."""
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            raise RuntimeError(
                "dispatch_sync() would block the event loop that runs the nested call; "
                "an async body awaits ctx.dispatch() instead"
            )
        future = asyncio.run_coroutine_threadsafe(
            self.dispatch(ctx, name, arguments, call_id), self._loop
        )
        return future.result()
