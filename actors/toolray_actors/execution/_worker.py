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

Every call's outcome is a :class:`toolray.isolation.CallOutcome`; outcomes leave the worker
as JSON (``toolray.isolation.outcomes_bytes``), which its executor reads as data: a body that
shares this process chooses nothing the executor unpickles.

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
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any, cast

from toolray import AbortSignal, ToolRunContext
from toolray.isolation import (
    BodyHost,
    CallOutcome,
    ToolInterrupted,
    body_limit,
    outcomes_bytes,
    sandbox_config,
)
from toolray.lowlevel import Link
from toolray_actors._collector import pace_collector
from toolray_actors._env_wire import InstanceInfo
from toolray_actors._executor_wire import CallOverdue
from toolray_actors._placement import PROCESS_ISOLATION, WorkerSettings
from toolray_actors._remote import node_id
from toolray_actors._stats import ActorStats, ChildStats, WorkerStatus, actor_stats
from toolray_actors._wire import (
    AbortOrder,
    Settled,
    WorkerRequest,
    decode,
)

from ._call_code import SandboxSpec
from ._call_queue import Overdue, body_budget
from ._call_sizing import node_limit
from ._chain_gate import UNSTARTED, ChainGates
from ._children import CallProcesses
from ._env_lane import answer as env_answer
from ._env_worker import WorkerEnvironments, instance_of
from ._lane import LANES, LaneAddress, LaneServer
from ._nested_remote import nested_call, worker_context
from ._worker_chunks import MANY, chunk_json, company, entry, faulted, settle_into

__all__ = ("ToolInterrupted", "ToolWorker", "WorkerStatus", "body_limit")

_RETIRED = CallOutcome(status="retired")


def _sandbox(settings: WorkerSettings) -> SandboxSpec | None:
    """``isolation="sandbox"``: what each call's sandbox is told (its paths, its network)."""
    if settings.isolation != "sandbox":
        return None
    config = sandbox_config(
        read_paths=settings.read_paths,
        write_paths=settings.write_paths,
        network=settings.network,
    )
    return SandboxSpec(config=config, strict=settings.confinement == "strict")


class ToolWorker:
    """Runs ``execute(args, ctx)`` for the executor actors that dispatch to it."""

    def __init__(
        self,
        threads: int = 64,
        settings: WorkerSettings | None = None,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        pace_collector()
        self.settings = settings or WorkerSettings(threads=threads, isolation="shared")
        settings = self.settings
        limit = settings.max_bodies or body_limit(settings.threads)
        self._host = BodyHost(self._context, threads=settings.threads, max_bodies=limit)
        self._procs: CallProcesses | None = None
        if settings.isolation in PROCESS_ISOLATION:
            derived = max(limit, node_limit()) if settings.derive_processes else limit
            self._procs = CallProcesses(
                memory_mb=settings.memory_mb,
                warm=settings.warm_children,
                limit=settings.call_processes or derived,
                nested=nested_call,
                env=env or {},
                reuse=self.settings.reuse,
                sandbox=_sandbox(self.settings),
            )
        self._envs = WorkerEnvironments.of(self._procs, self.settings.memory_mb, nested_call)
        self._lock = threading.Lock()  # the control lane reads these from another thread
        self._active = 0
        self._last = time.monotonic()  # the last start or end of a call
        self._draining = False
        self._chains = ChainGates()
        self._lane = LaneServer(self.run_lane, self._env_lane)

    def _context(self, signal: AbortSignal, ident: Mapping[str, Any]) -> ToolRunContext:
        ctx = worker_context(signal, dict(ident))
        if "instance" in ident:  # shared isolation: the instance's state lives here
            ctx._environment = self._envs.environment_of(ident)
        return ctx

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
            fields = (request.token, request.key, request.blob, request.arguments, request.ident)
            iid = instance_of(request.ident)
            try:
                if iid is None:
                    outcome = await run(*fields, overdue)
                else:  # a call of an environment's instance: it runs where the state is
                    outcome = await self._envs.run(iid, *fields, shared=self._host.run)
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
            task.add_done_callback(functools.partial(settle_into, settled, request.token))
            tasks.append(task)
        left = len(tasks)
        try:
            while left:
                chunk = [entry(await settled.get())]
                await asyncio.sleep(0)  # outcomes settling in this tick join the chunk
                running = left - 1 - settled.qsize() - self._chains.held
                if self._procs is not None and running >= MANY:
                    # outcomes from call processes trickle in one by one: a moment's wait
                    # makes far fewer (costly) stream items of a wide message
                    await company(settled, max(MANY, left // 8))
                while not settled.empty():
                    chunk.append(entry(settled.get_nowait()))
                left -= sum(1 for entry in chunk if isinstance(entry, Settled))
                yield chunk
        finally:
            for task in tasks:  # the message was abandoned (its caller is gone)
                if not task.done():
                    task.cancel()

    async def run_wire(self, request: bytes) -> bytes:
        """:meth:`run` across Ray: the request as ``wire.encode`` bytes, its outcome as JSON."""
        call = cast("WorkerRequest", decode(request))
        return outcomes_bytes([(call.token, await self.run(call))])

    async def run_many_wire(self, requests: bytes) -> AsyncIterator[bytes]:
        """:meth:`run_many` across Ray: the requests as ``wire.encode`` bytes, chunks as JSON."""
        async for chunk in self.run_many(cast("list[WorkerRequest]", decode(requests))):
            yield chunk_json(chunk)

    async def run_lane(self, requests: bytes) -> AsyncIterator[bytes]:
        """:meth:`run_many_wire` for a message on the local lane (a lone call runs directly)."""
        match cast("list[WorkerRequest]", decode(requests)):
            case [request] if body_budget(request.ident) is None:  # nothing to say meanwhile
                try:
                    outcome = await self.run(request)
                except Exception as err:  # a fault of the worker itself: this call's failure
                    outcome = faulted(err)
                yield outcomes_bytes([(request.token, outcome)])
            case several:
                async for chunk in self.run_many(several):
                    yield chunk_json(chunk)

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
        in_instance = self._envs.abort(token, reason, interrupt_after, kill_after)
        if in_instance is not None:
            return in_instance
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
        in_instance = self._envs.interrupt(token)
        if in_instance is not None:
            return in_instance
        if self._procs is not None:
            return self._procs.interrupt(token)
        return self._host.interrupt(token)

    async def kill_call(self, token: str) -> bool:
        """Last step (``"call"`` only): kill the call's process; its mates run on."""
        in_instance = self._envs.kill(token)
        if in_instance is not None:
            return in_instance
        return self._procs.kill(token) if self._procs is not None else False

    async def status(self) -> WorkerStatus:
        """Counters for the pool and the runtime statistics."""
        host = self._host.stats()
        children = self._procs.stats() if self._procs is not None else None
        held, opened, lost = self._envs.counts()
        with self._lock:  # a worker holding instances is never idle (never retired)
            idle = 0.0 if self._active or held else time.monotonic() - self._last
        return WorkerStatus(
            pid=os.getpid(),
            in_flight=host.in_flight,
            runs=host.runs,
            cached_definitions=host.cached_definitions,
            isolation=self.settings.isolation,
            children=children
            or ChildStats(live=0, idle=0, forks=0, kills=0, deaths=0, retired=0, replacements=0),
            idle_s=idle,
            instances=held,
            instances_opened=opened,
            instances_lost=lost,
            instance_pids=self._envs.pids(),
        )

    # ------------------------------------------------------------------ environments
    async def env_open(
        self, iid: str, key: str, blob: bytes, config: object, snapshot: bytes | None
    ) -> InstanceInfo:
        """Open (``create(config)``) or restore an instance here; where it lives."""
        pid = await self._envs.open(iid, key, blob, config, snapshot)
        return InstanceInfo(pid=pid, node=node_id())

    async def env_operate(self, iid: str, op: str, data: bytes | None = None) -> bytes | None:
        """``snapshot`` / ``run`` / ``park`` / ``close`` an instance held here."""
        return await self._envs.operate(iid, op, data)

    async def env_fork(self, iid: str, new_iid: str, how: str) -> InstanceInfo:
        """A copy of an instance held here (``how``: ``"process"`` or ``"callable"``)."""
        pid = await self._envs.fork(iid, new_iid, how)
        return InstanceInfo(pid=pid, node=node_id())

    def _env_lane(self, payload: bytes) -> Awaitable[bytes]:
        """An environment verb sent on the local lane (:mod:`._env_lane`)."""
        verbs = (self.env_open, self.env_operate, self.env_fork, self.env_discard)
        return env_answer(payload, {v.__name__: v for v in verbs})

    async def env_discard(self, iid: str) -> None:
        """Free what is left of an instance (a lost one, or an unclaimed fork)."""
        await self._envs.discard(iid)

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

    async def until_death(self) -> None:
        """Never answers: its pool manager learns of the worker's death by its error."""
        await asyncio.get_running_loop().create_future()
