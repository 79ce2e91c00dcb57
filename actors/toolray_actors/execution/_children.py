"""Call processes of one worker (``isolation="call"``): each call alone in its own process.

A :class:`CallProcesses` owns the worker's template and the call processes forked from it.
A call takes an idle process (or waits for one; more are forked when calls wait, up to
the worker's body limit) and gets its :class:`CallDone`. A process whose call ended cleanly
takes later calls of the same tool only (``reuse="tool"``; with ``"never"`` none:
``_call_idle``); an unclean one is retired. A process that dies under its call fails
that call only (``lost``, saying how); one killed on request (the ladder's last step) fails
it as ``killed`` at once, and is never reused. A replacement is forked at once. The worker
actor never runs a body itself, so it survives all of that.

All on the worker's loop except ``abort``, ``interrupt`` and ``kill`` (the worker's control
lane, another thread). Plain asyncio and sockets, no Ray: nested dispatch is injected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping

from toolray.errors import SandboxUnavailableError, ToolrayError
from toolray.isolation import (
    MISSING,
    AbortCall,
    CallDone,
    CallOutcome,
    CallOverdue,
    ErrorData,
    InterruptCall,
    Message,
    NestedAnswer,
    NestedRequest,
    ProcessLink,
    Ready,
    RunCall,
    describe_exit,
    error_data,
    missing_layers,
)
from toolray.procs import Child, Template
from toolray_actors._stats import ChildStats

from . import _call_queue as calls
from ._call_code import SandboxSpec, TemplateCode
from ._call_idle import IdleProcesses, Reuse, Waiters
from ._call_orders import KILLED, KILLED_EARLY, Call, CallOrders, settle
from ._call_sizing import GROW_AFTER_S, Sizing

__all__ = ("CallProcesses", "Nested")

Ident = Mapping[str, object]  # a call's identity (JSON)
Nested = Callable[[Ident, NestedRequest], Awaitable[NestedAnswer]]
"""Runs a call process's nested request for the call whose identity is given."""

_EXIT_WAIT_S = 2.0
"""How long a dead process's call waits for the template to say how it ended."""


class CallProcesses:
    """The call processes of one worker and the calls running in them."""

    def __init__(
        self,
        *,
        memory_mb: int,
        warm: int,
        limit: int,
        nested: Nested,
        env: Mapping[str, str] | None = None,
        reuse: Reuse = "tool",
        sandbox: SandboxSpec | None = None,
    ) -> None:
        self._memory_mb = memory_mb
        self._reuse: Reuse = "never" if sandbox is not None else reuse  # a sandbox: one call
        self._nested = nested
        self.code = TemplateCode(env, sandbox)  # environment instances fork from it too
        self._refused: ErrorData | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._orders = CallOrders(self)
        self._procs: dict[int, ProcessLink] = {}
        self._idle: IdleProcesses[ProcessLink] = IdleProcesses()
        self._waiters: Waiters[Call] = Waiters()
        self._forking = 0
        self._grow_at: asyncio.TimerHandle | None = None
        self._sizing = Sizing(warm=warm, limit=max(1, limit))
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.forks = self.kills = self.deaths = self.retired = self.replacements = 0
        self.runs = self.descendants = 0

    # ------------------------------------------------------------------ the template
    def _template_now(self) -> Template:
        if self._loop is None:
            self._loop = self._orders.loop = asyncio.get_running_loop()
        return self.code.template()

    async def warm_up(self) -> int:
        """Fork the warm processes now and wait for them; returns how many are idle."""
        self._template_now()
        forks = [self._fork(replacing=False) for _ in range(self._sizing.warm - len(self._procs))]
        await asyncio.gather(*(f for f in forks if f is not None))
        return len(self._idle)

    async def prepare(self, key: str, blob: bytes) -> None:
        """Hold ``key``'s code before its calls come (idle processes without it are replaced)."""
        self._template_now()
        self.code.learn(key, blob)
        stale = self._idle.fresh_without(key)
        for proc in stale:
            self._idle.remove(proc)
            self._retire(proc)
        forks = [self._fork(replacing=False) for _ in stale]
        await asyncio.gather(*(f for f in forks if f is not None))

    def _fork(self, *, replacing: bool) -> asyncio.Task[None] | None:
        if self._closed:
            return None
        self._forking += 1
        self.replacements += replacing
        return self._spawn(self._forked(self._template_now(), self.code.loaded()))

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _forked(self, template: Template, known: set[str]) -> None:
        args, workdir = self.code.fork_args(self._memory_mb)
        try:  # a sandbox is pid 1 of a pid namespace of its own
            child = await template.fork_async(args, pid_namespace=workdir is not None)
        except (OSError, ToolrayError):
            self.code.forget(workdir)
            self._forking -= 1
            if not self._procs and not self._forking:  # none alive and none coming
                calls.fail_all(self._waiters, _lost("could not be started"))
            return
        self._forking -= 1
        self.forks += 1
        self._adopt(child, known, workdir)

    def _adopt(self, child: Child, known: set[str], workdir: str | None) -> None:
        if self._closed:
            child.kill()
            child.close()
            self.code.forget(workdir)
            return
        proc = ProcessLink(child, known=known, on_message=self._on_message, on_end=self._ended)
        proc.workdir = workdir
        self._procs[proc.pid] = proc
        if workdir is None:  # a sandbox takes calls once it says it is confined
            self._release(proc)

    def _ready(self, proc: ProcessLink, confinement: Mapping[str, object]) -> None:
        """A sandbox is confined: it takes calls, unless ``strict`` misses a layer in it."""
        proc.report = dict(confinement)
        missing = missing_layers(proc.report)
        sandbox = self.code.sandbox
        if sandbox is not None and sandbox.strict and missing:  # the host lacks it: all fail
            self._refused = error_data(SandboxUnavailableError(missing))
            self._retire(proc)
            calls.fail_all(self._waiters, CallOutcome(status="error", error=self._refused))
            return
        self._release(proc)

    # ------------------------------------------------------------------ assignment
    async def run(
        self,
        token: str,
        key: str,
        blob: bytes | None,
        arguments: object,
        ident: Ident,
        overdue: calls.Overdue | None = None,
    ) -> CallOutcome:
        """Run one call in a process of its own; never raises for the body's faults.

        Without an idle process it waits (within its ``max_queue_s``: ``OVERLOADED``); its
        body's budget counts from its start, and ``overdue()`` is told when it ran out
        (``_call_queue``).
        """
        if self._loop is None:
            self._template_now()
        if blob is not None:
            self.code.learn(key, blob)
        elif self.code.blob(key) is None:
            return MISSING
        assert self._loop is not None
        if self._refused is not None:  # confinement="strict" on a host that lacks a layer
            return CallOutcome(status="error", error=self._refused)
        call = Call(token, key, arguments, ident, self._loop.create_future(), overdue=overdue)
        self.runs += 1
        if not self._orders.arrive(call):
            return KILLED_EARLY
        proc = self._idle.take(key)
        if proc is not None:
            self._start_on(proc, call)  # an early abort follows it there
        elif call.aborts:  # aborted, and it would wait: it never starts
            self._orders.leave(token)
            return calls.never_started("the call was aborted before it reached its worker")
        else:
            other = self._idle.take_other(key)  # bound to another tool: make room
            if other is not None:
                self._retire(other)
                self._fork(replacing=False)
            calls.wait(call, self._waiters)
            if self._grow_at is None:
                self._grow_at = self._loop.call_later(GROW_AFTER_S, self._grow)
        try:
            return await call.done
        finally:
            calls.stop_expiry(call)
            self._orders.leave(token)

    def _grow(self) -> None:
        self._grow_at = None
        head = self._waiters.head()
        since = head.queued if head is not None else 0.0
        wanted = self._sizing.forks_wanted(
            time.monotonic(), len(self._waiters), len(self._procs), self._forking, since
        )
        if wanted is None:  # short calls keep freeing processes: look again later
            assert self._loop is not None
            self._grow_at = self._loop.call_later(GROW_AFTER_S, self._grow)
            return
        for _ in range(wanted):
            self._fork(replacing=False)

    def _release(self, proc: ProcessLink) -> None:
        """``proc`` is free: the longest-waiting call takes it, else it waits idle."""
        self._orders.running(proc, None)
        self._sizing.released(time.monotonic())
        head = self._waiters.head()
        if head is not None and proc.bound not in (None, head.key) and not self._forking:
            # the longest-waiting call is another tool's: a process for it, in place of
            # this one when the worker has no room for more (calls of this tool may wait)
            if len(self._procs) >= self._sizing.limit or not self._waiters.has(proc.bound):
                self._retire(proc)
                self._fork(replacing=False)
                return
            self._fork(replacing=False)
        call = self._waiters.take_for(proc.bound)  # a process serves one tool only
        if call is not None:
            self._start_on(proc, call)
            return
        proc.idle_since = time.monotonic()
        self._idle.put(proc)
        for _ in range(self._sizing.trim(proc.idle_since, self._idle.ages())):
            self._retire(self._idle.pop_oldest())

    def _start_on(self, proc: ProcessLink, call: Call) -> None:
        calls.stop_expiry(call)  # it waits no more (its max_queue_s is over)
        ident = {k: v for k, v in call.ident.items() if k != "home"}
        assert proc.bound in (None, call.key), "a process serves one tool only"
        blob = None if call.key in proc.known else self.code.blob(call.key)
        call.coded = blob is not None
        run = RunCall(
            token=call.token, key=call.key, blob=blob, arguments=call.arguments, ident=ident
        )
        try:
            proc.send(run)
        except ValueError as err:  # its arguments cannot cross: its failure, not the process's
            failed = error_data(RuntimeError(f"the call {err}"))
            settle(call, CallOutcome(status="error", error=failed))
            self._release(proc)
            return
        self._orders.running(proc, call)
        calls.count_body(call)  # its body's budget counts from now (the worker's backstop)
        proc.known.add(call.key)
        proc.bound = call.key
        for reason in call.aborts:
            proc.send(AbortCall(token=call.token, reason=reason))

    def _on_message(self, proc: ProcessLink, message: Message) -> None:
        call = proc.call
        if isinstance(message, CallDone) and call is not None and message.token == call.token:
            outcome = message.outcome
            resend = outcome.status == "missing" and not call.coded
            resend = resend and self.code.blob(call.key) is not None
            if not self._orders.finished(proc, keep=resend):  # the kill's end stands
                return
            if resend:  # its template could not load the tool: send it the code
                proc.known.discard(call.key)
                self._start_on(proc, call)
                return
            self._sizing.took(message.body_s)
            self.descendants += message.left
            settle(call, outcome)
            if message.clean and self._reuse == "tool":
                self._release(proc)
            elif self._reuse == "never":  # each call a fresh process: after its caller woke
                assert self._loop is not None
                self._loop.call_soon(self._renew, proc)
            else:
                self._retire(proc)
        elif isinstance(message, NestedRequest) and call is not None:
            self._spawn(self._answer(proc, call, message))
        elif isinstance(message, CallOverdue) and call is not None:
            calls.pass_on_overdue(call, message.token)  # measured where its body runs
        elif isinstance(message, Ready) and proc.report is None and proc.workdir is not None:
            self._ready(proc, message.confinement)

    async def _answer(self, proc: ProcessLink, call: Call, request: NestedRequest) -> None:
        try:
            answer = await self._nested(call.ident, request)
            if proc.call is call:
                proc.send(answer)
        except Exception as exc:  # the dispatch raised, or its result cannot cross
            if proc.call is call:
                proc.send(NestedAnswer(id=request.id, error=error_data(exc)))

    # ------------------------------------------------------------------ endings
    def _retire(self, proc: ProcessLink) -> None:
        """An idle or unclean process goes (its whole group)."""
        self.retired += 1
        proc.kill()

    def _renew(self, proc: ProcessLink) -> None:
        """A process that served its one call goes; a fresh one is forked in its place."""
        self._retire(proc)
        self._fork(replacing=False)

    def _ended(self, proc: ProcessLink) -> None:
        """``proc``'s socket closed (once): it died, was killed, or was retired."""
        call = proc.call
        self._procs.pop(proc.pid, None)
        self._idle.remove(proc)
        self.code.forget(proc.workdir)
        if proc.killed:  # killed on request: _killed_now settles, counts and replaces it
            return
        if call is not None and not call.done.done():
            self.deaths += 1
            calls.stop_expiry(call)  # its body is over: it ends lost, never overdue
            self._spawn(self._settle_ended(proc, call))
        if not self._closed and (call is not None or self._waiters):
            self._fork(replacing=True)

    def killed_now(self, call: Call) -> None:
        """A call whose process was killed on request: it ends now (its replacement first)."""
        self.kills += not call.done.done()
        if not self._closed:
            self._fork(replacing=True)
        settle(call, KILLED)

    async def _settle_ended(self, proc: ProcessLink, call: Call) -> None:
        status = await proc.wait_exit(_EXIT_WAIT_S)
        settle(call, _lost(proc.broken or describe_exit(status, self._memory_mb)))

    # ------------------------------------------------------------------ control lane
    def abort(self, token: str, reason: object) -> bool:
        """Forward an abort to the call's process (remembered if the call is not here yet)."""
        return self._orders.abort(token, reason)

    def interrupt(self, token: str) -> str:
        """Forward an interrupt; a call still waiting for a process stops at once."""
        return self._orders.interrupt(token)

    def kill(self, token: str) -> bool:
        """Kill the call's process group (its call fails ``killed``); ``False`` if gone."""
        return self._orders.kill(token)

    def forward(self, call: Call, message: AbortCall | InterruptCall) -> None:
        """An order of the control lane, on the loop: to the call's process, or its wait."""
        proc = call.proc
        if proc is not None and proc.call is call:
            proc.send(message)
        elif proc is None and not call.done.done():  # it waits: it never starts now
            self._waiters.remove(call)
            calls.stop_expiry(call)
            what = "aborted" if isinstance(message, AbortCall) else "interrupted"
            settle(call, calls.never_started(f"the call was {what} while it waited for a process"))

    # ------------------------------------------------------------------ statistics
    def stats(self) -> ChildStats:
        """A frozen snapshot of the counters."""
        return ChildStats(
            in_flight=len(self._orders),
            runs=self.runs,
            live=len(self._procs),
            idle=len(self._idle),
            forks=self.forks,
            kills=self.kills,
            deaths=self.deaths,
            retired=self.retired,
            replacements=self.replacements,
            descendants=self.descendants + self.code.orphans(),
            pids=tuple(self._procs),
        )

    def close(self) -> None:
        """Kill every process and the template (the worker is shutting down)."""
        self._closed = True
        for proc in list(self._procs.values()):
            proc.kill()
        self.code.stop()


def _lost(how: str) -> CallOutcome:
    return CallOutcome(status="lost", detail=f"the call's process {how}")
