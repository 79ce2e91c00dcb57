"""Call processes of one worker (``isolation="call"``): each call alone in its own process.

A :class:`CallProcesses` owns the worker's template and the call processes forked from it.
A call takes an idle process (or waits for one; more are forked when calls wait, up to
the worker's body limit) and gets its :class:`CallDone`. A process whose call ended cleanly
takes the next call; an unclean one is retired. A process that dies under its call fails
that call only (``lost``, saying how); one killed on request (the ladder's last step) fails
it as ``killed`` at once, and is never reused. A replacement is forked at once. The worker
actor never runs a body itself, so it survives all of that.

All on the worker's loop except ``abort``, ``interrupt`` and ``kill`` (the worker's control
lane, another thread). Plain asyncio and sockets, no Ray: nested dispatch is injected.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Coroutine, Mapping

from toolray.errors import ToolrayError
from toolray.isolation import (
    MISSING,
    AbortCall,
    CallDone,
    CallOutcome,
    CallOverdue,
    InterruptCall,
    Message,
    NestedAnswer,
    NestedRequest,
    ProcessLink,
    RunCall,
    describe_exit,
)
from toolray.procs import Child, Template
from toolray_actors._stats import ChildStats

from . import _call_queue as calls
from ._call_code import TemplateCode
from ._call_sizing import GROW_AFTER_S, Sizing

__all__ = ("CallProcesses", "Nested")

Ident = Mapping[str, object]  # a call's identity (JSON)
Nested = Callable[[Ident, NestedRequest], Awaitable[NestedAnswer]]
"""Runs a call process's nested request for the call whose identity is given."""

_EXIT_WAIT_S = 2.0
"""How long a dead process's call waits for the template to say how it ended."""
_MAX_EARLY = 4096
_KILL = object()  # among a call's early orders: its kill came first (it never starts)
_KILLED_EARLY = CallOutcome(status="killed", detail="killed before it started")
_KILLED = CallOutcome(status="killed", detail="killed on request")


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
    ) -> None:
        self._memory_mb = memory_mb
        self._nested = nested
        self._code = TemplateCode(env)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self._calls: dict[str, calls.WorkerCall] = {}
        self._early: OrderedDict[str, list[object]] = OrderedDict()
        self._procs: dict[int, ProcessLink] = {}
        self._idle: deque[ProcessLink] = deque()
        self._waiters = calls.CallQueue()
        self._forking = 0
        self._grow_at: asyncio.TimerHandle | None = None
        self._sizing = Sizing(warm=warm, limit=max(1, limit))
        self._background: set[asyncio.Task[None]] = set()
        self._closed = False
        self.forks = self.kills = self.deaths = self.retired = self.replacements = 0
        self.runs = 0

    # ------------------------------------------------------------------ the template
    def _template_now(self) -> Template:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._code.template()

    async def warm_up(self) -> int:
        """Fork the warm processes now and wait for them; returns how many are idle."""
        self._template_now()
        forks = [self._fork(replacing=False) for _ in range(self._sizing.warm - len(self._procs))]
        await asyncio.gather(*(f for f in forks if f is not None))
        return len(self._idle)

    async def prepare(self, key: str, blob: bytes) -> None:
        """Hold ``key``'s code before its calls come (idle processes without it are replaced)."""
        self._template_now()
        self._code.learn(key, blob)
        stale = [proc for proc in self._idle if key not in proc.known]
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
        return self._spawn(self._forked(self._template_now(), self._code.loaded()))

    def _spawn(self, coro: Coroutine[object, object, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _forked(self, template: Template, known: set[str]) -> None:
        try:
            child = await template.fork_async({"memory_mb": self._memory_mb})
        except (OSError, ToolrayError):
            self._forking -= 1
            if not self._procs and not self._forking:  # none alive and none coming
                self._waiters.fail_all(calls.lost("could not be started"))
            return
        self._forking -= 1
        self.forks += 1
        self._adopt(child, known)

    def _adopt(self, child: Child, known: set[str]) -> None:
        if self._closed:
            child.kill()
            child.close()
            return
        proc = ProcessLink(child, known=known, on_message=self._on_message, on_end=self._ended)
        self._procs[proc.pid] = proc
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

        Without an idle process it waits; its body's budget counts from its start, and
        ``overdue()`` is told when it ran out (``_call_queue``).
        """
        if self._loop is None:
            self._template_now()
        if blob is not None:
            self._code.learn(key, blob)
        elif self._code.blob(key) is None:
            return MISSING
        assert self._loop is not None
        call = calls.WorkerCall(
            token, key, arguments, ident, self._loop.create_future(), overdue=overdue
        )
        self.runs += 1
        with self._lock:
            call.aborts = self._early.pop(token, [])
            if _KILL in call.aborts:
                return _KILLED_EARLY
            if call.aborts and not self._idle:  # aborted, and it would wait: it never starts
                return calls.never_started("the call was aborted before it reached its worker")
            self._calls[token] = call
        if self._idle:
            self._start_on(self._idle.pop(), call)  # an early abort follows it there
        else:
            self._waiters.wait(call, calls.queue_budget(ident))
            if self._grow_at is None:
                self._grow_at = self._loop.call_later(GROW_AFTER_S, self._grow)
        try:
            return await call.done
        finally:
            calls.stop_expiry(call)
            with self._lock:
                self._calls.pop(token, None)

    def _grow(self) -> None:
        self._grow_at = None
        self._waiters.prune()  # drop the head's calls that settled while waiting
        since = self._waiters.oldest()
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
        with self._lock:
            proc.call = None
        self._sizing.released(time.monotonic())
        waiting = self._waiters.take()
        if waiting is not None:
            self._start_on(proc, waiting)
            return
        proc.idle_since = time.monotonic()
        self._idle.append(proc)
        for _ in range(self._sizing.trim(proc.idle_since, [p.idle_since for p in self._idle])):
            self._retire(self._idle.popleft())

    def _start_on(self, proc: ProcessLink, call: calls.WorkerCall) -> None:
        ident = {k: v for k, v in call.ident.items() if k != "home"}
        blob = None if call.key in proc.known else self._code.blob(call.key)
        run = RunCall(
            token=call.token, key=call.key, blob=blob, arguments=call.arguments, ident=ident
        )
        try:
            proc.send(run)
        except ValueError as err:  # its arguments cannot cross: its failure, not the process's
            calls.settle(call, CallOutcome(status="error", error=RuntimeError(f"the call {err}")))
            self._release(proc)
            return
        with self._lock:
            proc.call, call.proc = call, proc
        calls.count_body(call)  # its body's budget counts from now
        proc.known.add(call.key)
        for reason in call.aborts:
            proc.send(AbortCall(token=call.token, reason=reason))

    def _on_message(self, proc: ProcessLink, message: Message) -> None:
        call = proc.call
        if isinstance(message, CallDone) and call is not None and message.token == call.token:
            outcome = message.outcome
            resend = outcome.status == "missing" and self._code.blob(call.key) is not None
            with self._lock:  # from here on a late kill of this call misses its process
                if proc.killed:  # its end crossed its kill: the kill's end stands
                    return
                if not resend:
                    proc.call = None
            if resend:  # its template could not load the tool: send it the code
                proc.known.discard(call.key)
                self._start_on(proc, call)
                return
            self._sizing.took(message.body_s)
            calls.settle(call, outcome)
            if message.clean:
                self._release(proc)
            else:
                self._retire(proc)
        elif isinstance(message, NestedRequest) and call is not None:
            self._spawn(self._answer(proc, call, message))
        elif isinstance(message, CallOverdue) and call is not None:
            calls.pass_on_overdue(call, message.token)  # measured where its body runs

    async def _answer(
        self, proc: ProcessLink, call: calls.WorkerCall, request: NestedRequest
    ) -> None:
        try:
            answer = await self._nested(call.ident, request)
        except Exception as exc:
            answer = NestedAnswer(id=request.id, error=exc)
        if proc.call is call:
            proc.send(answer)

    # ------------------------------------------------------------------ endings
    def _retire(self, proc: ProcessLink) -> None:
        """An idle or unclean process goes (its whole group)."""
        self.retired += 1
        proc.kill()

    def _ended(self, proc: ProcessLink) -> None:
        """``proc``'s socket closed (once): it died, was killed, or was retired."""
        call = proc.call
        self._procs.pop(proc.pid, None)
        with contextlib.suppress(ValueError):
            self._idle.remove(proc)
        if proc.killed:  # killed on request: _killed_now settles, counts and replaces it
            return
        if call is not None and not call.done.done():
            self.deaths += 1
            calls.stop_expiry(call)  # its body is over: it ends lost, never overdue
            self._spawn(self._settle_ended(proc, call))
        if not self._closed and (call is not None or self._waiters):
            self._fork(replacing=True)

    def _killed_now(self, call: calls.WorkerCall) -> None:
        """A call whose process was killed on request: it ends now (its replacement first)."""
        self.kills += not call.done.done()
        if not self._closed:
            self._fork(replacing=True)
        calls.settle(call, _KILLED)

    async def _settle_ended(self, proc: ProcessLink, call: calls.WorkerCall) -> None:
        status = await proc.wait_exit(_EXIT_WAIT_S)
        calls.settle(call, calls.lost(describe_exit(status, self._memory_mb)))

    # ------------------------------------------------------------------ control lane
    def abort(self, token: str, reason: object) -> bool:
        """Forward an abort to the call's process (remembered if the call is not here yet)."""
        with self._lock:
            call = self._calls.get(token)
            if call is None:
                self._remember(token, reason)
                return False
        self._on_loop(self._forward, call, AbortCall(token=token, reason=reason))
        return True

    def _remember(self, token: str, order: object) -> None:  # the lock is held
        self._early.setdefault(token, []).append(order)
        if len(self._early) > _MAX_EARLY:
            self._early.popitem(last=False)

    def interrupt(self, token: str) -> str:
        """Forward an interrupt; a call still waiting for a process stops at once."""
        with self._lock:
            call = self._calls.get(token)
        if call is None or call.done.done():
            return "gone"
        self._on_loop(self._forward, call, InterruptCall(token=token))
        return "forwarded"

    def kill(self, token: str) -> bool:
        """Kill the call's process group (its call fails ``killed``); ``False`` if gone."""
        with self._lock:
            call = self._calls.get(token)
            if call is None:  # not here yet (or settled): a later arrival never starts
                self._remember(token, _KILL)
                return False
            proc = call.proc
            if proc is not None and proc.call is call:
                proc.killed = True
                proc.signal_kill()  # final: the call ends now, not at its end of file
                self._on_loop(self._killed_now, call)
                return True
        if proc is not None:
            return False  # settled already
        self._on_loop(calls.settle, call, _KILLED_EARLY)
        return True

    def _on_loop(self, fn: Callable[..., object], *args: object) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker is going
                self._loop.call_soon_threadsafe(fn, *args)

    def _forward(self, call: calls.WorkerCall, message: AbortCall | InterruptCall) -> None:
        proc = call.proc
        if proc is not None and proc.call is call:
            proc.send(message)
        elif proc is None and self._waiters.remove(call):  # it waits: it never starts now
            what = "aborted" if isinstance(message, AbortCall) else "interrupted"
            calls.settle(
                call, calls.never_started(f"the call was {what} while it waited for a process")
            )
        elif proc is None and isinstance(message, AbortCall):
            call.aborts.append(message.reason)

    # ------------------------------------------------------------------ statistics
    def stats(self) -> ChildStats:
        """A frozen snapshot of the counters."""
        return ChildStats(
            in_flight=len(self._calls),
            runs=self.runs,
            live=len(self._procs),
            idle=len(self._idle),
            forks=self.forks,
            kills=self.kills,
            deaths=self.deaths,
            retired=self.retired,
            replacements=self.replacements,
            pids=tuple(self._procs),
        )

    def close(self) -> None:
        """Kill every process and the template (the worker is shutting down)."""
        self._closed = True
        for proc in list(self._procs.values()):
            proc.kill()
        self._code.stop()
