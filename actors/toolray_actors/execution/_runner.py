"""The Ray body runner: one body on a worker actor, with the cancellation ladder.

Dispatch is coalesced (``_coalesce``): the calls bound for one worker within one loop tick
travel in one message (as ``wire.encode`` bytes; on the worker's local lane when it is on
this executor's node, else as a Ray actor call: ``_worker_transport``), and their outcomes
stream back as they settle. A chained batch's
calls (``ChainRunner``) all go to one worker, which gates them (``_chain_gate``). The rest
is per call, by the call's token: when the body's (fused) signal fires, (1) the abort is
forwarded on the worker's control lane, firing the body's own signal; (2) after
``cancel_grace_ms``, an interrupt (an awaiting body's task is cancelled; a sync body's
thread gets ``ToolInterrupted``) — never ``ray.cancel``, which would stop the call's mates;
(3) after ``kill_grace_ms`` from the abort, a kill: with ``isolation="call"`` the call's own
process, with ``"shared"`` the worker actor, which is replaced. A killed call keeps its
cause (``ABORTED``; the timeout policy makes it ``TOOL_TIMEOUT``), ``info.reason`` saying
what was terminated; a process that dies on its own gives ``WORKER_LOST``. Nothing is re-run
here (the pipeline retries by a retry policy). A value is checked against
``max_result_bytes`` where the body ran (``RESULT_TOO_LARGE``). A call that waits for
capacity is not running: its ``timeout_ms`` counts on its worker from the body's start
(``_call_clock``).
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from toolray import AbortError, ToolRunContext, ToolWorkerLostError
from toolray.isolation import CallOutcome
from toolray.lowlevel import Entry, Link, run_body_inline, thaw_json
from toolray.policies import body_timers
from toolray_actors._errors import is_actor_death, is_cancelled, task_cause, wire_reason
from toolray_actors._handles import kill
from toolray_actors._placement import PROCESS_ISOLATION
from toolray_actors._remote import node_id, send
from toolray_actors._wire import AbortOrder, WorkerRequest

from ._call_clock import CallClock
from ._call_result import SENDS, unpack
from ._chains import RunnerChains, fits
from ._coalesce import AbortQueue, Outbox
from ._deaths import SentAt
from ._env_backend import RayInstance
from ._lane import LaneClient
from ._pool_client import PoolClient, WorkerSlot
from ._prepare import CodePreparer
from ._worker import ToolWorker
from ._worker_transport import WorkerTransport

__all__ = ("RayBodyRunner", "RunnerStats")

_KILL_ECHO_S = 0.1
"""How long the executor waits for the worker's own kill of a call's process to answer
before it orders the kill itself (a worker swamped, or the abort lost with its message)."""

_log = logging.getLogger("toolray")


class RunnerStats:
    """Counters of the ladder."""

    def __init__(self) -> None:
        self.calls = self.in_flight = self.aborts = self.interrupts = self.kills = 0
        self.lost = 0
        self.messages = 0
        """Messages that carried calls to workers (``calls / messages``: coalescing)."""
        self.local = 0
        """Those of them sent on a worker's local lane (the rest: Ray actor calls)."""


class RayBodyRunner:
    """A ``BodyRunner`` that dispatches bodies to worker actors."""

    def __init__(
        self,
        pools: Callable[[Any], PoolClient],
        key_of: Callable[[Any], tuple[str, bytes] | None],
        *,
        cancel_grace_ms: float,
        kill_grace_ms: float,
        home: tuple[str, str] = ("", ""),
        on_kill: Callable[[PoolClient], None] | None = None,
        node: str | None = None,
    ) -> None:
        self._pools = pools
        self._on_kill = on_kill  # the kill step's metric
        self._key_of = key_of
        self._node = node  # this executor's node: workers on it are reached on their lane
        self._where = node or node_id()
        self._home = home  # (executor actor name, namespace): where workers send nested calls
        self.live: dict[str, ToolRunContext] = {}
        """The contexts of executions whose bodies are out on workers, by token id."""
        self.cancel_grace = cancel_grace_ms / 1000.0
        self.kill_grace = max(kill_grace_ms / 1000.0, self.cancel_grace)
        self.stats = RunnerStats()
        self._prefix = f"{uuid.uuid4().hex[:12]}-"
        self._tokens = itertools.count(1)
        self.prepare = CodePreparer(pools, key_of).prepare
        """Before a rate-limited call takes its token: its pool's members hold its code."""
        self._lanes: weakref.WeakKeyDictionary[WorkerSlot, tuple[Outbox, AbortQueue]] = (
            weakref.WeakKeyDictionary()
        )
        self._chains = RunnerChains(
            self._prefix,
            notify=lambda slot, link: send(slot.handle, ToolWorker.chain_done, link),
            ask=lambda slot, link: send(slot.handle, ToolWorker.seal_chain, link),
        )
        # ``ChainRunner``: a new chain, a place that ended unseen, where an abort found one
        self.chain, self.sealed = self._chains.new, self._chains.sealed
        self.unlinked = functools.partial(self._chains.ended, tell_worker=True)

    def chainable(self, definition: Any, cap: int) -> bool:
        """``ChainRunner``: whether its calls may wait for their turn on one worker."""
        if definition.environment is not None:  # its calls go where its instance lives
            return False
        pool = self._pools(definition.placement)
        return fits(definition, cap, pool) and self._key_of(definition) is not None

    def _lane(self, slot: WorkerSlot) -> tuple[Outbox, AbortQueue]:
        """The slot's outbox (calls) and abort queue (its control lane), made on first use."""
        lane = self._lanes.get(slot)
        if lane is None:
            handle = slot.handle
            aborts = AbortQueue(
                lambda o: send(
                    handle, ToolWorker.abort, o.token, o.reason, o.interrupt_after, o.kill_after
                ),
                lambda orders: send(handle, ToolWorker.abort_many, orders),
            )
            transport = WorkerTransport(handle, self._node, self._count)
            lane = self._lanes[slot] = (Outbox(transport), aborts)
        return lane

    def env_lane(self, slot: WorkerSlot) -> LaneClient | None:
        """The worker's open local lane, for one verb of its instances (``None``: Ray's)."""
        outbox, _ = self._lane(slot)
        client = outbox.transport.lane() if isinstance(outbox.transport, WorkerTransport) else None
        self._count(client is not None)
        return client

    def _count(self, local: bool) -> None:
        self.stats.messages += 1
        self.stats.local += local

    async def __call__(self, call: Any, entry: Entry, ctx: ToolRunContext) -> Any:
        """Run the body remotely; return its value or raise its (or the ladder's) error."""
        definition = entry.definition
        found = self._key_of(definition)
        link: Link | None = call.link
        if found is None:  # not a mirrored definition (e.g. the run_code transport)
            return await self._chains.here(
                link, ctx.signal, lambda: run_body_inline(call, entry, ctx)
            )
        key, blob = found
        pool = self._pools(definition.placement)
        clock = CallClock(body_timers(ctx.token), pool.max_queue_s)  # waiting is not running
        pick = functools.partial(pool.pick, ctx.signal, clock.waits, pool.max_queue_s)
        live_id = ctx.token.id
        ident = {
            "call_id": ctx.call_id,
            "name": ctx.name,
            "root_call_id": ctx.root_call_id,
            "scope": ctx.scope,
            "token": live_id,
            "parent": ctx.parent.id if ctx.parent is not None else None,
            "home": self._home,
            "max_result_bytes": call.registry.farm.result_bytes(definition),
        }
        observed = call.observed
        if observed is not None and observed.trace is not None:  # the body runs in its span
            ident["traceparent"] = str(observed.trace)
        placed = call.environment  # a call of an environment's instance: where it lives
        if placed is not None:
            ident["instance"], pool = placed.iid, placed.pool
        token = f"{self._prefix}{next(self._tokens)}"  # unique per worker; no uuid per call
        arguments = thaw_json(ctx.arguments)
        self.stats.calls += 1
        self.live[live_id] = ctx  # nested calls from the body map back to it (and only it)
        counted = False  # whether the chain's worker counts its place (it ran it there)
        if (linked := link) is not None:
            call.notes["chain"] = linked.chain  # its span in a trace says so
        try:
            for _ in range(SENDS):
                slot = await self._chains.slot(link, pick) if link else None
                if slot is None:
                    if link is not None:  # its chain is broken: its turn comes here
                        await self._chains.turn(link, ctx.signal)
                        link = None
                    slot = placed.slot if placed is not None else await pick()
                if (left := clock.left()) is not None:
                    ident["max_queue_s"] = left
                # its worker counts the body's time (an instance's calls: counted here)
                isolation = pool.isolation if placed is None else "shared"
                if (budget := clock.leaves(isolation)) is not None:
                    ident["timeout_s"] = budget
                call.notes["worker"] = slot.wid
                counted = link is not None
                try:
                    outcome = await self._run_on(
                        pool,
                        slot,
                        WorkerRequest(token, key, blob, arguments, ident, link),
                        ctx,
                        call.notes,
                        placed,
                        clock,
                    )
                finally:  # what the ladder killed under this call, for its trace
                    call.notes["killed"] = slot.killed or call.notes.get("killed", False)
                if outcome.status == "missing":
                    slot.sent.discard(key)
                    counted = False  # its place is given back until it comes again
                elif outcome.status == "retired":  # an elastic pool retired it: not started
                    pool.retire(slot, killed=False)
                    if link is not None:
                        self._chains.broken(link)
                        counted = False
                else:
                    break
        finally:
            self.live.pop(live_id, None)
            if linked is not None:
                self._chains.ended(linked, tell_worker=not counted)
        if linked is not None and outcome.status == "ok" and ctx.signal.aborted:
            call.sealed = await self.sealed(linked)  # its success may stand
        return unpack(outcome, ctx)

    async def _run_on(
        self,
        pool: PoolClient,
        slot: WorkerSlot,
        request: WorkerRequest,
        ctx: ToolRunContext,
        notes: dict[str, Any],
        instance: RayInstance | None,
        clock: CallClock,
    ) -> CallOutcome:
        token, key = request.token, request.key
        outbox, _ = self._lane(slot)
        sent = request.without_code() if key in slot.sent else request
        when = SentAt.now(self._where)  # no later than it leaves (``_deaths``)
        result = outbox.submit(sent, clock.overdue)
        slot.sent.add(key)
        slot.in_flight += 1
        self.stats.in_flight += 1
        try:
            return await self._await(pool, (slot, when), token, result, ctx, notes, instance)
        finally:
            slot.in_flight -= 1
            self.stats.in_flight -= 1
            pool.released(slot)

    async def _await(
        self,
        pool: PoolClient,
        sent: tuple[WorkerSlot, SentAt],
        token: str,
        result: asyncio.Future[CallOutcome],
        ctx: ToolRunContext,
        notes: dict[str, Any],
        instance: RayInstance | None,
    ) -> CallOutcome:
        signal, (slot, _) = ctx.signal, sent
        if not signal.aborted:
            # one future woken by the result or the signal: no extra task per call
            loop = asyncio.get_running_loop()
            wake: asyncio.Future[None] = loop.create_future()
            result.add_done_callback(lambda _: _set(wake))
            remove = signal.add_listener(lambda: loop.call_soon_threadsafe(_set, wake))
            try:
                await wake
            finally:
                remove()
        # per-call isolation: the abort carries the ladder, and the worker interrupts and
        # kills the call's process itself (one message instead of three)
        local = pool.isolation in PROCESS_ISOLATION
        if not result.done():
            self.stats.aborts += 1
            _, aborts = self._lane(slot)
            ladder = (self.cancel_grace, self.kill_grace) if local else (None, None)
            aborts.put(AbortOrder(token, wire_reason(signal.reason), *ladder))  # with its mates
            await asyncio.wait({result}, timeout=self.cancel_grace)
        if not result.done():
            self.stats.interrupts += 1
            if not local:
                send(slot.handle, ToolWorker.interrupt, token)  # this call only, not its message
            await asyncio.wait({result}, timeout=self.kill_grace - self.cancel_grace)
        if local and not result.done():  # the worker kills it now: its end is on its way
            await asyncio.wait({result}, timeout=_KILL_ECHO_S)
        if not result.done() or _killed(result):
            self.stats.kills += 1
            if self._on_kill is not None:
                self._on_kill(pool)
            what = self._kill(pool, slot, token, notes, echoed=result.done())
            if instance is not None:  # the kill took the instance with it
                instance.lost = f"{what} was killed: a call of it ignored its deadline or abort"
            err = AbortError("tool call aborted")
            err.reason = (
                f"{what} was terminated: the tool ignored cancellation for "
                f"{self.kill_grace * 1000:g}ms"
            )
            raise err
        return await self._settled(pool, sent, result, ctx, instance)

    def _kill(
        self, pool: PoolClient, slot: WorkerSlot, token: str, notes: dict[str, Any], echoed: bool
    ) -> str:
        """The ladder's last step; names what it killed (``echoed``: the worker did it)."""
        if pool.isolation in PROCESS_ISOLATION:
            if not echoed:  # the worker's own kill has not answered: order it from here
                send(slot.handle, ToolWorker.kill_call, token)  # its mates run on
            notes["killed"] = "process"
            return "the call's process"
        kill(slot.handle)
        pool.replace_soon(slot, killed=True)
        return "the worker"

    async def _settled(
        self,
        pool: PoolClient,
        sent: tuple[WorkerSlot, SentAt],
        result: Any,
        ctx: ToolRunContext,
        instance: RayInstance | None,
    ) -> CallOutcome:
        slot, when = sent
        try:
            outcome: CallOutcome = result.result()
        except Exception as raw:
            err = task_cause(raw)
            if is_cancelled(err) or isinstance(err, asyncio.CancelledError):
                aborted = AbortError("tool call aborted")
                aborted.reason = "ray.cancel stopped the tool"
                raise aborted from None
            if is_actor_death(err):
                # retired by its pool, or known dead before the call left: it never ran
                if instance is None and await pool.never_ran(slot, when):
                    return CallOutcome(status="retired")
                if slot.killed and ctx.signal.aborted:
                    killed = AbortError("tool call aborted")
                    killed.reason = "the worker was terminated"
                    raise killed from None
                self.stats.lost += 1
                if not slot.killed:
                    # a death may have taken the node: the pool checks every member first
                    await pool.replace(slot, killed=False)
                if instance is not None:
                    raise instance.lose("the worker holding it died") from None
                raise ToolWorkerLostError(
                    f'the worker running tool "{ctx.name}" died ({type(err).__name__}); '
                    "the call was not re-run"
                ) from None
            raise err from None
        if outcome.status == "lost":
            self.stats.lost += 1
            if instance is not None:
                raise instance.lose(outcome.detail)
            raise ToolWorkerLostError(
                f'{outcome.detail} while running tool "{ctx.name}"; the call was not re-run'
            )
        return outcome


def _killed(result: asyncio.Future[CallOutcome]) -> bool:
    """``result`` is the call's end by the worker's kill (the ladder's last step)."""
    return (
        result.done()
        and not result.cancelled()
        and result.exception() is None
        and result.result().status == "killed"
    )


def _set(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
