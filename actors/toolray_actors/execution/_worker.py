"""``ToolWorker``: runs tool bodies only; serves aborts while a body runs.

A plain class (testable without Ray); ``_handles`` turns it into an async actor whose
``abort`` / ``interrupt`` / ``kill_call`` / ``status`` / ``health`` run on a separate
``control`` lane, which is the only way to reach a busy worker in milliseconds. Because
that lane is another thread with its own loop, everything it touches is thread-safe.

Where a body runs is the pool's isolation:

- ``"call"`` — each call alone in a call process of this worker (:class:`CallProcesses`);
  a crash, a memory blow-up or a kill ends that process, fails that call only, and the
  worker lives on;
- ``"shared"`` — every body in this process (:class:`toolray.isolation.BodyHost`): async
  bodies as tasks of the worker's loop, sync bodies in its thread pool. Fastest; a body
  that crashes the process takes every call of the worker with it.

Every call's outcome is a :class:`toolray.isolation.CallOutcome`.

For an elastic pool the worker keeps the time of its last call's start or end (``status``
reports how long it has been idle), and once *drained* it starts no more calls: each is
answered ``retired`` and its executor sends it to another worker, unstarted.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast

from toolray import AbortSignal, ToolRunContext
from toolray.isolation import (
    BodyHost,
    CallOutcome,
    NestedAnswer,
    NestedRequest,
    ToolInterrupted,
    aborted,
    body_limit,
    shippable_error,
)
from toolray.lowlevel import Link
from toolray_actors._executor_wire import CallOverdue
from toolray_actors._placement import WorkerSettings
from toolray_actors._remote import node_id
from toolray_actors._stats import ActorStats, ChildStats, WorkerStatus, actor_stats
from toolray_actors._wire import (
    AbortOrder,
    ExecutorHome,
    Settled,
    WorkerRequest,
    decode,
    encode,
)

from ._call_queue import Overdue, body_budget
from ._call_sizing import node_limit
from ._chain_gate import UNSTARTED, ChainGates
from ._children import CallProcesses
from ._lane import LANES, LaneAddress, LaneServer
from ._nested_remote import RemoteNested, worker_context

__all__ = ("ToolInterrupted", "ToolWorker", "WorkerStatus", "body_limit")

_RETIRED = CallOutcome(status="retired")

_MANY = 8
"""Calls still running in a message that make its next chunk wait a moment for company."""
_CHUNK_STEP_S = 0.002
_CHUNK_STEPS = 10
"""A chunk of a wide message waits at most this many steps for an eighth of its mates."""


def _entry(item: tuple[str, asyncio.Task[CallOutcome]] | CallOverdue) -> Settled | CallOverdue:
    """What travels for a queued item: a call's word as it is, a settled task's outcome."""
    return item if isinstance(item, CallOverdue) else _outcome_of(*item)


def _outcome_of(token: str, task: asyncio.Task[CallOutcome]) -> Settled:
    if task.cancelled():  # cancelled before its body started (the message was abandoned)
        stopped = aborted("the call was cancelled before it started")
        return Settled(token, CallOutcome(status="error", error=stopped))
    err = task.exception()
    if err is not None:  # a fault of the worker itself: this call's failure, not the message's
        return Settled(token, _faulted(err))
    return Settled(token, task.result())


def _faulted(err: BaseException) -> CallOutcome:
    """A call's outcome when the worker itself failed running it."""
    return CallOutcome(status="error", error=shippable_error(err))


def _context(signal: AbortSignal, ident: Mapping[str, Any]) -> ToolRunContext:
    return worker_context(signal, dict(ident))


async def _nested(ident: Mapping[str, Any], request: NestedRequest) -> NestedAnswer:
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
    result = await RemoteNested(home).dispatch(
        ctx, request.name, request.arguments, request.call_id
    )
    return NestedAnswer(id=request.id, result=result)


class ToolWorker:
    """Runs ``execute(args, ctx)`` for the executor actors that dispatch to it."""

    def __init__(
        self,
        threads: int = 64,
        settings: WorkerSettings | None = None,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings(threads=threads, isolation="shared")
        settings = self.settings
        limit = settings.max_bodies or body_limit(settings.threads)
        self._host = BodyHost(_context, threads=settings.threads, max_bodies=limit)
        self._procs: CallProcesses | None = None
        if settings.isolation == "call":
            derived = max(limit, node_limit()) if settings.derive_processes else limit
            self._procs = CallProcesses(
                memory_mb=settings.memory_mb,
                warm=settings.warm_children,
                limit=settings.call_processes or derived,
                nested=_nested,
                env=env or {},
            )
        self._lock = threading.Lock()  # the control lane reads these from another thread
        self._active = 0
        self._last = time.monotonic()  # the last start or end of a call
        self._draining = False
        self._chains = ChainGates()
        self._lane = LaneServer(self.run_lane)

    def _enter(self) -> bool:
        """Count a call in; ``False`` once drained (the call must go elsewhere)."""
        with self._lock:
            if self._draining:
                return False
            self._active += 1
            self._last = time.monotonic()
            return True

    def _leave(self) -> None:
        with self._lock:
            self._active -= 1
            self._last = time.monotonic()

    # ------------------------------------------------------------------ default lane
    async def run(self, request: WorkerRequest, overdue: Overdue | None = None) -> CallOutcome:
        """Run one body; never raises for the body's own faults.

        ``request`` is one record (one serialized value per call is measurably cheaper for
        the executor than five arguments). The definition is resolved before the first
        await, so the calls of a message start in request order. A call with a timeout
        budget has it counted from its body's start; ``overdue()`` is told when it ran out
        (``_call_queue``).
        """
        if not self._enter():
            return _RETIRED
        link = request.link
        try:
            if link is not None and not await self._chains.enter(request.token, link):
                return UNSTARTED  # aborted while it waited for its turn in its chain
            run = self._procs.run if self._procs is not None else self._host.run
            ended = True
            try:
                outcome = await run(
                    request.token,
                    request.key,
                    request.blob,
                    request.arguments,
                    request.ident,
                    overdue,
                )
                ended = outcome.status not in ("missing", "retired")
                return outcome
            finally:
                if link is not None:
                    self._chains.leave(request.token, link, ended=ended)
        finally:
            self._leave()

    async def run_many(
        self, requests: list[WorkerRequest]
    ) -> AsyncIterator[list[Settled | CallOverdue]]:
        """Run a coalesced message: each call in its own task; outcomes as they settle.

        Yields lists of :class:`Settled`: the outcomes that settled in the same loop
        tick travel together, with a :class:`CallOverdue` for a call whose body overran.
        The first request of a key carries its blob for its mates (started in request
        order). Each call stays addressable on the control lane by its token (abort,
        interrupt, kill) without touching its mates.
        """
        settled: asyncio.Queue[tuple[str, asyncio.Task[CallOutcome]] | CallOverdue]
        settled = asyncio.Queue()
        tasks = []
        for request in requests:
            overdue = functools.partial(settled.put_nowait, CallOverdue(request.token))
            task = asyncio.ensure_future(self.run(request, overdue))
            task.add_done_callback(functools.partial(_settle, settled, request.token))
            tasks.append(task)
        left = len(tasks)
        try:
            while left:
                chunk = [_entry(await settled.get())]
                await asyncio.sleep(0)  # outcomes settling in this tick join the chunk
                running = left - 1 - settled.qsize() - self._chains.held
                if self._procs is not None and running >= _MANY:
                    # outcomes from call processes trickle in one by one: a moment's wait
                    # makes far fewer (costly) stream items of a wide message
                    await _company(settled, max(_MANY, left // 8))
                while not settled.empty():
                    chunk.append(_entry(settled.get_nowait()))
                left -= sum(1 for entry in chunk if isinstance(entry, Settled))
                yield chunk
        finally:
            for task in tasks:  # the message was abandoned (its caller is gone)
                if not task.done():
                    task.cancel()

    async def run_wire(self, request: bytes) -> bytes:
        """:meth:`run` across Ray: the request and its outcome as ``wire.encode`` bytes."""
        return encode(await self.run(cast("WorkerRequest", decode(request))))

    async def run_many_wire(self, requests: bytes) -> AsyncIterator[bytes]:
        """:meth:`run_many` across Ray: the requests and each chunk as ``wire.encode`` bytes."""
        async for chunk in self.run_many(cast("list[WorkerRequest]", decode(requests))):
            yield encode(chunk)

    async def run_lane(self, requests: bytes) -> AsyncIterator[bytes]:
        """:meth:`run_many_wire` for a message on the local lane (a lone call runs directly)."""
        match cast("list[WorkerRequest]", decode(requests)):
            case [request] if body_budget(request.ident) is None:  # nothing to say meanwhile
                try:
                    outcome = await self.run(request)
                except Exception as err:  # a fault of the worker itself: this call's failure
                    outcome = _faulted(err)
                yield encode([Settled(request.token, outcome)])
            case several:
                async for chunk in self.run_many(several):
                    yield encode(chunk)

    async def lane(self, node: str) -> LaneAddress | None:
        """The local lane, for an executor on ``node`` (``None``: another node, or none here)."""
        if not LANES or self._lane.full or node != node_id():
            return None
        return await self._lane.open(node)

    async def seal_chain(self, link: Link) -> int:
        """Stop ``link``'s chain (once); the first place whose stage was not over by then."""
        return self._chains.seal(link)

    async def chain_done(self, link: Link) -> None:
        """The call at ``link`` will not come (or ended elsewhere): later places go on."""
        self._chains.done(link)

    async def prepare(self, key: str, blob: bytes) -> bool:
        """Hold ``key``'s code before its calls come (``False``: its blob does not load)."""
        try:
            if self._procs is not None:
                await self._procs.prepare(key, blob)
            else:
                self._host.resolve(key, blob)
        except Exception:  # its calls will fail with the cause
            return False
        return True

    async def warm_up(self) -> int:
        """Start the call processes (``"call"``); the number ready (0 when shared)."""
        return await self._procs.warm_up() if self._procs is not None else 0

    # ------------------------------------------------------------------ control lane
    async def abort(
        self,
        token: str,
        reason: Any = None,
        interrupt_after: float | None = None,
        kill_after: float | None = None,
    ) -> bool:
        """Fire the body's signal (cooperative step); ``False`` if the call is not here yet.

        With ``kill_after`` (per-call isolation) the worker runs the rest of the ladder
        itself: it interrupts the call ``interrupt_after`` seconds from now and kills its
        process ``kill_after`` seconds from now, unless the call has ended by then.
        """
        if self._chains.abort(token):  # held in its chain: it never starts, nor do its mates
            return True
        if self._procs is None:
            return self._host.abort(token, reason)
        found = self._procs.abort(token, reason)
        if kill_after is not None:
            loop = asyncio.get_running_loop()
            if interrupt_after is not None:
                loop.call_later(interrupt_after, self._procs.interrupt, token)
            loop.call_later(kill_after, self._procs.kill, token)
        return found

    async def abort_many(self, items: list[AbortOrder]) -> int:
        """:meth:`abort` for several calls at once (a batch aborted as a whole)."""
        found = 0
        for item in items:
            found += await self.abort(
                item.token, item.reason, item.interrupt_after, item.kill_after
            )
        return found

    async def interrupt(self, token: str) -> str:
        """Stronger step: cancel an awaiting body's task, or inject into a sync body's thread."""
        if self._procs is not None:
            return self._procs.interrupt(token)
        return self._host.interrupt(token)

    async def kill_call(self, token: str) -> bool:
        """Last step (``"call"`` only): kill the call's process; its mates run on."""
        return self._procs.kill(token) if self._procs is not None else False

    async def status(self) -> WorkerStatus:
        """Counters for the pool and the runtime statistics."""
        host = self._host.stats()
        children = self._procs.stats() if self._procs is not None else None
        with self._lock:
            idle = 0.0 if self._active else time.monotonic() - self._last
        return WorkerStatus(
            pid=os.getpid(),
            in_flight=host.in_flight,
            runs=host.runs,
            cached_definitions=host.cached_definitions,
            isolation=self.settings.isolation,
            children=children
            or ChildStats(live=0, idle=0, forks=0, kills=0, deaths=0, retired=0, replacements=0),
            idle_s=idle,
        )

    async def drain(self) -> int:
        """Start no more calls (each is answered ``retired``); the calls still running."""
        with self._lock:
            self._draining = True
            return self._active

    async def actor_stats(self) -> ActorStats:
        """This worker's identity and footprint."""
        return actor_stats("worker", f"worker:{os.getpid()}", 0)

    async def health(self) -> int:
        """The worker's pid (it answers even while bodies run)."""
        return os.getpid()


async def _company(settled: asyncio.Queue[Any], wanted: int) -> None:
    """Wait (a few milliseconds at most) until ``wanted`` outcomes are ready to travel."""
    for _ in range(_CHUNK_STEPS):
        if settled.qsize() + 1 >= wanted:
            return
        await asyncio.sleep(_CHUNK_STEP_S)


def _settle(settled: Any, token: str, task: asyncio.Task[Any]) -> None:
    settled.put_nowait((token, task))
