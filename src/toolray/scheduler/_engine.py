"""The scheduler: the one engine that runs calls through the pipeline by the planner's stages.

A batch (``batch/_run.py``) and a Code Mode program's sub-calls (``codemode/_program.py``)
both run here; they differ only in how calls arrive — all at once (a *closed* lane) or one
by one while the lane runs (an *open* lane) — and in what they do on the :class:`Hooks`.
The rules (B-SCHED, B-ORDER, B-ABORT, B-ERR, C-CODE-6/7/12):

- **stages** come from the pure planner (:mod:`toolray.scheduler._plan`): the call at the
  front is classified and opens a stage (:func:`next_stage`); each later call of a parallel
  stage is reclassified just before it starts and joins it (:func:`joins`) or ends it
  (:func:`cut`) — it then heads the next stage, once this one has drained and committed;
- **chains** (``_chain``): a runner that gates bodies may take a closed lane's plan at once;
- **the cap**: at most ``cap`` dispatch stages are in flight; a call whose result is
  waiting for its commit, or that never reached dispatch, holds no slot;
- **one ordered lane**: starts (the start hook, then ``prepare``: pre-execute, approval,
  guards) and commits (``complete``: post-execute, finish, then the commit hook) run here,
  one at a time, in call order; only the dispatch stages (around-dispatch and the body) of
  parallel calls run in tasks of their own, so a later call's result waits for every
  earlier commit. An exclusive call's dispatch stage runs on the lane itself: nothing else
  may start or commit meanwhile, so a task would only cost loop turns;
- **abort** is a flag sampled at checkpoints — when a stage opens, after each start and its
  commits, after each settle and its commits — and sticky: no call starts after it is seen,
  started calls are drained and committed, then :meth:`Hooks.skipped` gets every call that
  never started (a batch writes synthetic pairs, a program's queued calls are abandoned);
- **failure**: an exception on the lane (a bug, a failing commit hook) stops it; the
  dispatch stages already started are awaited, and the exception propagates (an open lane
  first tells :meth:`Hooks.failed`, so no caller waits forever).

An open lane has one driver at a time: a caller whose call needs the lane drives it until
its call is done (no hand-off, no extra loop turn), then hands the rest to a driver task.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, final

from toolray._execution import ToolExecutionInput
from toolray._outcomes import ToolExecutionResult
from toolray._signals import AbortSignal
from toolray.pipeline._call import Call
from toolray.pipeline._dispatch import BodyRunner
from toolray.pipeline._observe import Observation
from toolray.pipeline._stages import complete, dispatch, prepare
from toolray.registry._lookup import ToolLookup

from ._chain import ChainRunner, links_of, plan_chain
from ._plan import OPEN_ENDED, ExecutionMode, Stage, cut, joins, next_stage

__all__ = ("Hooks", "Scheduler")

_YIELD_EVERY = 16


class Hooks:
    """What the scheduler tells its user, on the lane and in the order things happen.

    Every method does nothing here; a user overrides what it needs.
    """

    def chainable(self) -> bool:
        """Whether nothing of the user's sees when calls start and commit (see ``_chain``)."""
        return False

    def stage(self, stage: Stage) -> None:
        """A stage opened (at its widest; a reclassified call may cut it short)."""

    def started(self, index: int, mode: ExecutionMode) -> None:
        """Call ``index`` starts, classified ``mode``; ``prepare`` comes next."""

    def dispatched(self, index: int, in_flight: int) -> None:
        """Its dispatch stage runs in a task; ``in_flight`` such tasks are running."""

    def released(self, index: int) -> None:
        """Its dispatch task left the pool (settled, or awaited after a failure)."""

    def settled(self, index: int, call: Call) -> None:
        """Its dispatch stage settled; the commit waits for every earlier one."""

    async def committed(self, index: int, call: Call, result: ToolExecutionResult) -> None:
        """Call ``index`` committed with its final ``result`` (calls commit in order)."""

    def skipped(self, start: int, stop: int) -> None:
        """Calls ``start`` to ``stop`` (exclusive) never start: the lane was aborted."""

    def failed(self, error: BaseException, start: int, stop: int) -> None:
        """An open lane failed; calls ``start`` to ``stop`` (exclusive) will not commit."""


@final
class Scheduler:
    """Runs calls by the planner's stages on one ordered lane (see the module docstring).

    ``calls`` makes a closed lane (:meth:`run` runs them all); without it the lane is open
    (:meth:`submit`, :meth:`serve`, :meth:`drain`). ``within`` observes a batch: its
    observers hear of each call as a child of the batch.
    """

    def __init__(
        self,
        lookup: ToolLookup,
        signal: AbortSignal,
        cap: int,
        runner: BodyRunner,
        hooks: Hooks,
        *,
        calls: Sequence[ToolExecutionInput] | None = None,
        within: Observation | None = None,
    ) -> None:
        self._lookup = lookup
        self._within = within  # the batch's observers: the parents of its calls
        self._signal = signal
        self._cap = cap
        self._runner = runner
        self._hooks = hooks
        self._inputs: list[ToolExecutionInput] = list(calls or ())
        self._count = len(self._inputs) if calls is not None else OPEN_ENDED
        self._stage: Stage | None = None
        self._next = 0  # the next call to start
        self._committed = 0  # the next call to commit
        self._aborted = False  # the sampled abort flag
        self._ready: dict[int, Call] = {}
        self._in_flight: dict[asyncio.Task[Call], int] = {}
        self._settled: deque[asyncio.Task[Call]] = deque()  # no O(in-flight) wait per settle
        self._arrived = False
        self._waiter: asyncio.Future[None] | None = None
        self._driving = False
        self._driver: asyncio.Task[None] | None = None  # the last driver task (kept alive)
        self._idle = asyncio.Event()
        self._idle.set()
        self._dead = False  # an open lane failed or its driver was cancelled
        self._failure: BaseException | None = None
        self._chain_tried = calls is None or len(calls) < 2  # open, or nothing to chain
        self._chains: Any = None  # the runner, once it runs a chain

    # ------------------------------------------------------------------ a closed lane
    async def run(self) -> None:
        """Run every call of a closed lane; a failure propagates once started work is done."""
        try:
            await self._drive(None)
        except asyncio.CancelledError:
            for task in self._in_flight:
                task.cancel()
            await self._await_in_flight()
            raise
        except Exception:
            await self._await_in_flight()
            raise

    # ------------------------------------------------------------------ an open lane
    def submit(self, inp: ToolExecutionInput) -> int:
        """Queue one call behind every earlier one; returns its index."""
        if self._dead:
            raise self._failure or asyncio.CancelledError()
        self._inputs.append(inp)
        self._arrived = True
        self._wake()
        return len(self._inputs) - 1

    async def serve(self, done: Callable[[], bool]) -> None:
        """Drive the lane until ``done()`` holds, unless another driver is running."""
        if not self._driving:
            self._driving = True
            self._idle.clear()
            await self._drive_open(done)

    async def drain(self) -> None:
        """Once the lane's signal fired: skip queued calls, settle and commit the rest."""
        try:
            if not self._driving and self._has_work():
                self._hand_over()
            await self._idle.wait()
            if self._failure is not None:
                raise self._failure
        finally:
            if self._in_flight:  # only after a lane failure: never leave a body behind
                await asyncio.gather(*self._in_flight, return_exceptions=True)

    def _has_work(self) -> bool:
        """Something in flight, queued or uncommitted (a dead lane has none left to do)."""
        busy = bool(self._in_flight) or self._committed < len(self._inputs)
        return busy and not self._dead

    def _hand_over(self) -> None:
        """Let a driver task run the lane (the flag stays up: one driver at a time)."""
        self._driving = True
        self._idle.clear()
        self._driver = asyncio.ensure_future(self._drive_open(None))
        self._driver.add_done_callback(_retrieve)  # a failure is kept in _failure

    async def _drive_open(self, done: Callable[[], bool] | None) -> None:
        handed = False
        try:
            await self._drive(done)
            if self._has_work():
                self._hand_over()
                handed = True
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            self._waiter = None
            if not handed:
                self._driving = False
                self._idle.set()

    def _fail(self, exc: BaseException) -> None:
        self._dead = True
        if not isinstance(exc, asyncio.CancelledError):
            self._failure = exc
        start, stop = self._committed, len(self._inputs)
        self._next = self._committed = stop
        self._stage = None
        self._ready.clear()
        self._hooks.failed(exc, start, stop)

    # ------------------------------------------------------------------ the lane
    async def _drive(self, done: Callable[[], bool] | None) -> None:
        """Run stages until the lane is quiet, or until ``done()`` holds."""
        while done is None or not done():
            stage = self._stage
            if stage is None:
                if self._next == len(self._inputs):
                    return
                if self._signal.aborted:
                    self._skip()
                    continue
                if not self._chain_tried and await self._chain():
                    continue
                self._open()
                await self._fill()
            elif self._in_flight:
                await self._harvest()
                if self._committed in self._ready:
                    await self._commit_ready()
                self._aborted = self._aborted or self._signal.aborted  # a checkpoint
                if not self._aborted and self._next < len(self._inputs):
                    await self._fill()
            else:  # drained, and everything started has committed
                self._stage = None
                if self._aborted:
                    self._skip()

    def _mode(self, k: int) -> ExecutionMode:
        """Call ``k`` classified now (a registry change may have changed it)."""
        return self._lookup.execution_mode(self._inputs[k])

    def _open(self) -> None:
        start = self._next
        self._stage = next_stage(start, self._count, self._mode(start))
        self._aborted = self._signal.aborted
        self._hooks.stage(self._stage)

    async def _chain(self) -> bool:
        """Start every call left now, in order, as one chain (``False``: stage by stage)."""
        runner = self._chains = self._runner
        self._chain_tried = True
        if not isinstance(runner, ChainRunner) or not self._hooks.chainable():
            return False
        start = self._next
        stages = plan_chain(self._lookup, self._inputs, start, runner, self._cap)
        if stages is None:
            return False
        self._stage = Stage(kind="parallel", start=start, stop=len(self._inputs))
        dispatched: list[tuple[int, Call]] = []
        for stage in stages:
            self._hooks.stage(stage)
            for k in stage.indices:
                self._hooks.started(k, stage.kind)
                call = await prepare(self._lookup, self._inputs[k], self._within)
                if call.step == "dispatch":
                    dispatched.append((k, call))
                else:
                    self._ready[k] = call
                if (k - start + 1) % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
        self._next = len(self._inputs)
        links = links_of(runner.chain(), stages, [k for k, _ in dispatched], self._cap)
        for (k, call), link in zip(dispatched, links, strict=True):
            call.link = link
            task = asyncio.ensure_future(_linked(call, self._runner, runner))
            self._in_flight[task] = k
            task.add_done_callback(self._on_settled)
            self._hooks.dispatched(k, min(link.position - link.stage_start + 1, link.cap))
        if self._committed in self._ready:
            await self._commit_ready()
        return True

    def _skip(self) -> None:
        start, stop = self._next, len(self._inputs)
        self._next = self._committed = stop
        self._hooks.skipped(start, stop)

    async def _fill(self) -> None:
        """Start calls of the open stage while the cap, the stage and the abort flag allow."""
        stage = self._stage
        assert stage is not None
        self._arrived = False  # every call queued so far is looked at from here
        while not self._aborted and self._next < len(self._inputs):
            k = self._next
            if k >= stage.stop or len(self._in_flight) >= self._cap:
                return
            if k > stage.start and not joins(stage, k, self._mode(k)):
                self._stage = cut(stage, k)  # it heads the next stage, after the drain
                return
            await self._start(k, stage.kind)
            self._next = k + 1
            if (self._next - stage.start) % _YIELD_EVERY == 0:
                await asyncio.sleep(0)  # let dispatch tasks run during a wide fan-out
            if self._committed in self._ready:
                await self._commit_ready()
            self._aborted = self._aborted or self._signal.aborted  # a checkpoint

    async def _start(self, k: int, mode: ExecutionMode) -> None:
        self._hooks.started(k, mode)
        call = await prepare(self._lookup, self._inputs[k], self._within)
        if call.step != "dispatch":
            self._ready[k] = call
            return
        if mode == "exclusive":  # alone until it commits: its dispatch stage runs on the lane
            self._hooks.dispatched(k, len(self._in_flight) + 1)
            try:
                call = await dispatch(call, self._runner)
            finally:
                self._hooks.released(k)
            self._ready[k] = call
            self._hooks.settled(k, call)
            return
        task = asyncio.ensure_future(dispatch(call, self._runner))
        self._in_flight[task] = k
        task.add_done_callback(self._on_settled)
        self._hooks.dispatched(k, len(self._in_flight))

    async def _commit_ready(self) -> None:
        while self._committed in self._ready:
            k = self._committed
            call = self._ready.pop(k)
            if call.link is not None and self._signal.aborted and not call.sealed:
                call.sealed = await self._chains.sealed(call.link)
            result = await complete(call)
            await self._hooks.committed(k, call, result)
            self._committed = k + 1

    async def _harvest(self) -> None:
        """Wait for a settle (or, on an open lane, a new call); take every settled one."""
        while not self._settled and not self._arrived:
            # made only now: wake-ups come from other tasks, never between look and wait
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        self._waiter = None
        self._arrived = False
        while self._settled:
            task = self._settled.popleft()
            k = self._in_flight.pop(task)
            self._hooks.released(k)
            error = task.exception()
            if error is not None:
                raise error
            call = self._ready[k] = task.result()
            self._hooks.settled(k, call)

    # ------------------------------------------------------------------ settles
    def _on_settled(self, task: asyncio.Task[Call]) -> None:
        self._settled.append(task)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _await_in_flight(self) -> None:
        """Wait for every started dispatch stage (their failures are not this lane's)."""
        while self._in_flight:
            while not self._settled:
                self._waiter = asyncio.get_running_loop().create_future()
                await self._waiter
            self._waiter = None
            task = self._settled.popleft()
            k = self._in_flight.pop(task, None)
            if k is not None:
                self._hooks.released(k)
            if not task.cancelled():
                task.exception()


async def _linked(call: Call, runner: BodyRunner, chains: ChainRunner) -> Call:
    """A chained call's dispatch stage; its place is released if its body never went out."""
    try:
        return await dispatch(call, runner)
    finally:
        if not call.body_invoked:
            chains.unlinked(call.link)


def _retrieve(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()
