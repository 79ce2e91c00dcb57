"""The dispatch stage: the around-dispatch waterfall and the body.

The innermost ``next()`` re-fuses the caller's signal with any wrapper replacement, checks
it before the body (P-AROUND-15), resolves the tool *now* (P-BODY-3), runs the body through
a :data:`BodyRunner` and normalizes its outcome. A result a wrapper returns that this
dispatch did not produce is re-normalized (P-AROUND-4..8).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, TypeAlias

from toolray._context import NestedDispatcher, ToolRunContext
from toolray._execution import swap_signal
from toolray._normalize import (
    NOT_LOSSLESS,
    aborted,
    fail,
    failure_from,
    normalize_value,
    unknown_tool,
)
from toolray._outcomes import ToolExecutionFailure, ToolExecutionResult, ToolExecutionSuccess
from toolray._signals import AbortSignal, detach_sources
from toolray._trace import activated
from toolray._waterfall import run_waterfall
from toolray.farm._bounds import oversized
from toolray.registry._layers import Entry

from ._call import Call
from ._deadline import within_grace

__all__ = (
    "BodyRunner",
    "NestFactory",
    "current_notes",
    "current_runner",
    "inline_runner",
    "run_body_inline",
    "run_dispatch",
)

BodyRunner: TypeAlias = Callable[[Call, Entry, ToolRunContext], Awaitable[Any]]
"""Runs a body and returns its raw value (or raises): in-process, or on a Ray worker."""

NestFactory: TypeAlias = Callable[[Call, BodyRunner], NestedDispatcher]
"""Makes the dispatcher a body's run context uses for nested calls (``ctx.dispatch``)."""

_NESTED_THREADS = 64
_nested_pool: ThreadPoolExecutor | None = None
_nested_lock = threading.Lock()


def _nested_threads() -> ThreadPoolExecutor:
    """Threads for nested sync bodies, apart from the batch's own (no cap deadlock)."""
    global _nested_pool
    with _nested_lock:
        if _nested_pool is None:
            _nested_pool = ThreadPoolExecutor(_NESTED_THREADS, thread_name_prefix="toolray-nested")
        return _nested_pool


def inline_runner(
    threads: Callable[[], Executor | None] = lambda: None, deadline: AbortSignal | None = None
) -> BodyRunner:
    """An in-process runner: await an async body, run a sync one in a thread.

    ``deadline`` is a batch's deadline timer: a body still running its grace after it fired
    is no longer awaited (``pipeline/_deadline.py``).

    A value over the definition's (else the registry's) ``max_result_bytes`` fails
    ``RESULT_TOO_LARGE`` here, where the body ran.

    ``threads()`` gives the pool (``None``: the loop's default executor). A nested call's
    sync body runs on a separate pool: its caller may hold every thread of ``threads()``
    while it waits for the nested result.
    """

    async def run(call: Call, entry: Entry, ctx: ToolRunContext) -> Any:
        definition = entry.definition
        fn = definition.execute
        observed = call.observed
        if observed is not None and observed.trace is not None:
            with activated(observed.trace):  # the body runs in its call's span
                value = await body(call, fn, ctx, contextvars.copy_context().run)
        else:
            value = await body(call, fn, ctx, None)
        too_large = oversized(definition.name, value, call.registry.farm.result_bytes(definition))
        if too_large is not None:  # checked where the body ran (a Ray worker checks its own)
            raise too_large
        return value

    async def body(call: Call, fn: Any, ctx: ToolRunContext, within: Any) -> Any:
        if inspect.iscoroutinefunction(fn):
            if deadline is not None:
                return await within_grace(fn(ctx.arguments, ctx), deadline, call.registry.clock)
            return await fn(ctx.arguments, ctx)
        loop = asyncio.get_running_loop()
        pool = threads() if call.input.parent is None else _nested_threads()
        job = functools.partial(fn, ctx.arguments, ctx)
        if within is not None:  # a sync body's thread sees this task's context
            job = functools.partial(within, job)
        running = loop.run_in_executor(pool, job)
        if deadline is not None:
            value = await within_grace(running, deadline, call.registry.clock)
        else:
            value = await running
        if inspect.isawaitable(value):
            value = await value
        return value

    return run


run_body_inline: BodyRunner = inline_runner()
"""The default in-process runner (sync bodies on the loop's default executor)."""

_running: contextvars.ContextVar[tuple[BodyRunner, dict[str, Any]] | None] = contextvars.ContextVar(
    "toolray_running_body", default=None
)


def current_runner() -> BodyRunner:
    """The runner running the current body (its nested calls' bodies run the same way).

    Inside a body awaited by the dispatch stage this is that stage's runner (a Ray
    executor's worker runner, a batch's thread-pool runner); elsewhere the inline runner.
    """
    running = _running.get()
    return running[0] if running is not None else run_body_inline


def current_notes() -> dict[str, Any] | None:
    """The trace notes of the call whose body is running (a batch merges them into its span)."""
    running = _running.get()
    return running[1] if running is not None else None


async def _invoke(
    call: Call,
    entry: Entry,
    signal: AbortSignal,
    runner: BodyRunner,
    mark: list[bool],
    nest: NestFactory | None,
) -> ToolExecutionResult:
    execution = call.execution
    dispatcher = nest(call, runner) if nest is not None else None
    ctx = ToolRunContext(execution, signal, dispatcher=dispatcher)
    running = _running.set((runner, call.notes))
    try:
        environment = entry.definition.environment
        if environment is None:
            call.body_invoked = True
            value = await runner(call, entry, ctx)
        else:
            value = await _in_environment(call, entry, ctx, runner, environment)
    except Exception as exc:
        contexts, _ = ctx.collect()
        return failure_from(exc, contexts)
    finally:
        _running.reset(running)
    contexts, concludes = ctx.collect()
    mark[0] = concludes
    result = normalize_value(
        name=call.input.name,
        value=value,
        arguments=execution.arguments,
        output=entry.definition.output,
        check=call.registry.output_check(entry),
        top_level=call.input.parent is None,
        contexts=contexts,
        concludes_turn=concludes,
    )
    if isinstance(result, ToolExecutionSuccess) and signal.aborted and not call.sealed:
        return aborted(True, contexts)
    return result


async def _in_environment(
    call: Call, entry: Entry, ctx: ToolRunContext, runner: BodyRunner, name: str
) -> Any:
    """Run the body inside its scope's instance of ``name``, in the instance's turn.

    The call waits for its turn (exclusive unless it is concurrency-safe; a nested call of
    a caller holding the turn passes at once), the instance is opened or restored if it
    must be, and the body sees its live state as ``ctx.environment``.
    """
    inp = call.input
    instances = call.registry.environments
    exclusive = call.registry.execution_mode(inp) == "exclusive"
    async with instances.call(
        inp.scope,
        name,
        exclusive=exclusive,
        signal=ctx.signal,
        token=call.execution.token,
        parent=inp.parent,
    ) as placed:
        call.environment = placed
        ctx._environment = instances.state_of(placed)
        call.body_invoked = True
        try:
            return await runner(call, entry, ctx)
        finally:
            call.environment = None


def _renormalize(call: Call, result: Any, concluded: bool) -> tuple[str, ToolExecutionResult]:
    """A wrapper-authored outcome: failures kept verbatim, successes re-validated."""
    if isinstance(result, ToolExecutionFailure):
        return "post", result
    if not isinstance(result, ToolExecutionSuccess):
        return "final", fail(NOT_LOSSLESS)
    renormalized = call.renormalize(result.value, result.additional_contexts, concluded)
    return ("final" if renormalized.is_error else "post"), renormalized


async def run_dispatch(
    call: Call, runner: BodyRunner | None = None, nest: NestFactory | None = None
) -> Call:
    """Run the ``on_execute`` waterfall around the body; sets the next stage.

    ``nest`` makes the body context's nested-call dispatcher (none: ``ctx.dispatch`` is
    unavailable).
    """
    registry, inp, execution = call.registry, call.input, call.execution
    caller = inp.signal
    produced: list[ToolExecutionResult] = []
    mark = [False]

    async def base() -> ToolExecutionResult:
        current = execution.signal
        body_signal = current if current is caller else AbortSignal.any([current, caller])
        try:
            if body_signal.aborted:
                result: ToolExecutionResult = aborted(False)
            else:
                entry = registry.resolve_entry(inp.name, inp.scope, inp.tool_set, inp.parent)
                if entry is None:
                    result = unknown_tool(inp.name)
                else:
                    swap_signal(execution, body_signal)
                    result = await _invoke(
                        call, entry, body_signal, runner or run_body_inline, mark, nest
                    )
        finally:
            swap_signal(execution, current)
            if body_signal is not current:
                detach_sources(body_signal)
        produced.append(result)
        return result

    try:
        hooks = registry.hooks("execute", inp.scope)
        result = await run_waterfall(hooks, (execution,), base)
    except Exception as exc:
        return call.settle("final", failure_from(exc))
    if not any(result is p for p in produced):
        stage, result = _renormalize(call, result, mark[0])
        if stage == "final":
            return call.settle("final", result)
    if isinstance(result, ToolExecutionSuccess) and caller.aborted and not call.sealed:
        result = aborted(call.body_invoked, result.additional_contexts)
    return call.settle("post", result)
