"""The Code Mode sub-scheduler: one run's sub-calls on one ordered lane (C-CODE-6/7).

The native batch contract, for calls that arrive one by one from a program:

- calls start strictly in submission order, each reclassified (fail-closed) just before it
  starts; consecutive parallel calls overlap up to the cap, an exclusive call waits for an
  empty pool and holds its barrier until its commit — post-execute included — is done;
- one lane runs the start hook, ``prepare`` (pre-execute, approval, guards) and the
  head-of-line commit (post-execute, finish); only the dispatch stage (around-dispatch and
  the body) of a parallel call runs in a task of its own, so ordered stages never overlap
  (an exclusive call's dispatch stage runs on the lane: nothing else may start meanwhile);
- outcomes commit in submission order, so a fast later call waits for slower earlier ones;
- once the run's signal has fired, queued calls are abandoned (they never start, nothing
  is logged for them), started ones are awaited and committed: :meth:`SubLane.drain`
  returns at quiescence.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from toolray._execution import ToolExecutionInput
from toolray._outcomes import ToolExecutionResult
from toolray._signals import AbortSignal
from toolray.pipeline._call import Call
from toolray.pipeline._dispatch import BodyRunner
from toolray.pipeline._stages import complete, dispatch, prepare
from toolray.registry._lookup import ToolLookup

__all__ = ("SubCall", "SubLane")


@dataclass(eq=False, slots=True)
class SubCall:
    """One accepted binding call: its id, input, log copy and the future of its outcome."""

    sub_call_id: str
    name: str
    input: ToolExecutionInput
    logged: Any
    outcome: asyncio.Future[ToolExecutionResult]
    call: Call | None = None
    task: asyncio.Task[Call] | None = None
    mode: str = "exclusive"
    settled: bool = False
    span: dict[str, Any] = field(default_factory=dict)
    """Trace timings (absolute clock seconds) and the body runner's notes."""


class SubLane:
    """Starts and commits one run's sub-calls (see the module docstring)."""

    def __init__(
        self,
        lookup: ToolLookup,
        signal: AbortSignal,
        cap: int,
        runner: BodyRunner | None,
        *,
        on_start: Callable[[SubCall], None],
        on_commit: Callable[[SubCall, ToolExecutionResult], Awaitable[None]],
        on_abandon: Callable[[SubCall], None],
    ) -> None:
        self._lookup = lookup
        self._signal = signal
        self._cap = cap
        self._runner = runner
        self._on_start = on_start
        self._on_commit = on_commit
        self._on_abandon = on_abandon
        self._now = lookup.clock.now
        self._pending: deque[SubCall] = deque()
        self._commits: deque[SubCall] = deque()
        self._in_flight: set[asyncio.Task[Call]] = set()
        self._exclusive = False
        self._driver: asyncio.Task[None] | None = None  # the last driver task (kept alive)
        self._driving = False
        self._idle = asyncio.Event()
        self._idle.set()
        self._failure: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        loop = asyncio.get_running_loop()
        self._unhook = signal.add_listener(functools.partial(_threadsafe, loop, self._wake))

    async def run(self, sub: SubCall) -> ToolExecutionResult:
        """Queue ``sub`` behind every earlier call and return its outcome once it commits.

        One driver runs the lane at a time. When none is running, the caller's own task
        drives (no task hand-off, no extra loop turn) until ``sub`` has its outcome, then
        hands any remaining work to a driver task; otherwise the running driver serves it.
        """
        self._pending.append(sub)
        self._wake()
        if not self._driving:
            self._driving = True
            self._idle.clear()
            await self._drive(sub)
        return await sub.outcome

    async def drain(self) -> None:
        """After the run's signal fired: abandon queued calls, settle and commit the rest."""
        try:
            if self._pending and not self._driving:
                self._hand_over()
            await self._idle.wait()
            if self._failure is not None:
                raise self._failure
        finally:
            if self._in_flight:  # only after a lane failure: never leave a body behind
                await asyncio.gather(*self._in_flight, return_exceptions=True)
            self._unhook()

    # ------------------------------------------------------------------ the lane
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _may_start(self, mode: str) -> bool:
        if self._exclusive:
            return False
        return not self._in_flight if mode == "exclusive" else len(self._in_flight) < self._cap

    def _hand_over(self) -> None:
        """Let a driver task run the lane (the flag stays up: one driver at a time)."""
        self._driving = True
        self._idle.clear()
        self._driver = asyncio.ensure_future(self._drive(None))
        self._driver.add_done_callback(_retrieve)  # a failure is kept in _failure

    async def _drive(self, until: SubCall | None) -> None:
        """Run the lane until it is empty, or, driving for ``until``, until it has settled."""
        loop = asyncio.get_running_loop()
        handed = False
        try:
            while True:
                if until is not None and until.outcome.done():
                    if self._pending or self._commits or self._in_flight:
                        self._hand_over()
                        handed = True
                    return
                head = self._commits[0] if self._commits else None
                if head is not None and head.settled:
                    self._commits.popleft()
                    await self._commit(head)
                    if head.mode == "exclusive":
                        self._exclusive = False  # the barrier covers post-execute
                    continue
                if self._pending:
                    sub = self._pending[0]
                    if self._signal.aborted:
                        self._pending.popleft()
                        self._on_abandon(sub)
                        continue
                    mode = self._lookup.execution_mode(sub.input)
                    if self._may_start(mode):
                        self._pending.popleft()
                        await self._start(sub, mode)
                        continue
                if not (self._pending or self._commits or self._in_flight):
                    return
                # made only now: wake-ups come from other tasks, never between look and wait
                self._waiter = loop.create_future()
                await self._waiter
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            self._waiter = None
            if not handed:
                self._driving = False
                self._idle.set()

    async def _start(self, sub: SubCall, mode: str) -> None:
        sub.mode = mode
        sub.span.update(callId=sub.sub_call_id, name=sub.name, mode=mode, started=self._now())
        self._exclusive = mode == "exclusive"
        self._commits.append(sub)  # joins the commit order now; commits once settled
        self._on_start(sub)
        call = sub.call = await prepare(self._lookup, sub.input)
        if call.step != "dispatch":
            sub.settled = True
            sub.span["settled"] = sub.span["started"]
            return
        if mode == "exclusive":  # alone until its commit: its body may run on the lane
            sub.call = await dispatch(call, self._runner)
            sub.settled = True
            sub.span["settled"] = self._now()
            return
        task = asyncio.ensure_future(dispatch(call, self._runner))
        sub.task = task
        self._in_flight.add(task)
        task.add_done_callback(functools.partial(self._on_settled, sub))

    def _on_settled(self, sub: SubCall, task: asyncio.Task[Call]) -> None:
        self._in_flight.discard(task)
        sub.settled = True
        sub.span["settled"] = self._now()
        self._wake()

    async def _commit(self, sub: SubCall) -> None:
        if sub.task is not None:
            sub.call = sub.task.result()  # a dispatch stage that crashed fails the lane
        assert sub.call is not None
        result = await complete(sub.call)
        info = getattr(getattr(result, "error", None), "info", None)
        sub.span.update(sub.call.notes)
        sub.span.update(
            committed=self._now(), isError=result.is_error, code=info.code if info else None
        )
        await self._on_commit(sub, result)

    def _fail(self, exc: BaseException) -> None:
        """A lane failure (a bug, or cancellation): no binding may wait forever."""
        if not isinstance(exc, asyncio.CancelledError):
            self._failure = exc
        for sub in (*self._commits, *self._pending):
            if not sub.outcome.done():
                if isinstance(exc, asyncio.CancelledError):
                    sub.outcome.cancel()
                else:
                    sub.outcome.set_exception(exc)
        self._pending.clear()
        self._commits.clear()


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


def _threadsafe(loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits any more
        loop.call_soon_threadsafe(fn)
