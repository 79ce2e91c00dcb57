"""``TimeoutPolicy``: the ``on_execute`` wrapper that enforces ``timeout_ms`` (P-TIME).

It reads the budget of the definition the caller sees; with none it delegates untouched.
With one, it replaces the signal with ``any(previous, deadline)`` for the delegated
lifetime — the first source to fire sets the reason — and, if that reason is its own
deadline when ``next()`` settles, answers ``TOOL_TIMEOUT`` whatever came back (P-TIME-4..11).
The wait for capacity does not count: the deadline is a
:class:`~toolray._body_timer.BodyTimer`, which a runtime that queues calls (a worker slot, a
call process; a rate-limit token is taken before around-dispatch) pauses while the call
waits and starts again, with the whole budget, when its body starts.
The deadline runs on the clock of the host running the call (``execution.host``: the
registry, or the registry mirror inside a Ray executor actor). In-process there is no grace
and no kill: an uncooperative body keeps the call pending (P-TIME-9); the Ray layer adds the
kill.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, final

from toolray._body_timer import BodyTimer, register_body_timer, unregister_body_timer
from toolray._clock import Clock
from toolray._disposer import Disposer
from toolray._execution import ToolDispatchExecution
from toolray._normalize import failure_from
from toolray._outcomes import ToolExecutionResult
from toolray._signals import AbortSignal, TimeoutReason, detach_sources, format_ms
from toolray.errors import ToolTimeoutError

__all__ = ("TimeoutPolicy",)


class HookTarget(Protocol):
    """Where a policy installs: a registry, a scope, or their remote twins."""

    def on_execute(self, wrapper: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """Register an around-dispatch wrapper."""
        ...


@final
class TimeoutPolicy:
    """Enforce each tool's ``timeout_ms`` cooperatively.

    Example:
        >>> from toolray import ToolRegistry
        >>> reg = ToolRegistry()
        >>> dispose = TimeoutPolicy().install(reg)
        >>> dispose.disposed
        False
    """

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock = clock

    def install(self, context: HookTarget) -> Disposer:
        """Register the wrapper on ``context``: the registry, a scope, or their remote twins.

        The wrapper reads the budget from the host that runs each call, so the same policy
        works in-process and inside the Ray executor actors.
        """
        fixed_clock = self.clock

        async def wrapper(execution: ToolDispatchExecution, next_: Any) -> ToolExecutionResult:
            host = execution.host
            if host is None:
                return await next_()  # type: ignore[no-any-return]
            clock = fixed_clock if fixed_clock is not None else host.clock
            definition = host.get(execution.name, execution.scope, execution.tool_set)
            ms = getattr(definition, "timeout_ms", None)
            if ms is None:
                return await next_()  # type: ignore[no-any-return]
            previous = execution.signal
            timer = BodyTimer(ms / 1000.0, TimeoutReason(ms=ms), clock=clock)
            deadline = timer.signal
            budget = AbortSignal.any([previous, deadline])
            execution.signal = budget
            timer.start()  # a runner pauses it while the call waits for capacity
            register_body_timer(execution.token, timer)
            try:
                result: ToolExecutionResult = await next_()
            finally:
                execution.signal = previous
                unregister_body_timer(execution.token, timer)
                detach_sources(budget)
            reason = budget.reason
            if budget.aborted and isinstance(reason, TimeoutReason) and reason is deadline.reason:
                err = ToolTimeoutError(f"tool call timed out after {format_ms(ms)}ms")
                info = getattr(getattr(result, "error", None), "info", None)
                if info is not None and info.reason is not None:
                    err.reason = info.reason  # e.g. the Ray layer terminated the worker
                return failure_from(err, result.additional_contexts)
            return result

        return context.on_execute(wrapper)
