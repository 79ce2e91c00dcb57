"""``BodyHost``: runs tool bodies in this process, each addressable by its token.

The one body runner of both isolation modes: a worker actor with ``"shared"`` isolation
runs every body of its calls here, and a call's own process (``"call"``) runs its one body
here too. Async bodies run as tasks of the caller's loop; sync bodies in a thread pool, so
the loop stays free to deliver aborts. Each running call is reachable by its token from any
thread (a worker's control lane is another thread with its own loop):

- :meth:`BodyHost.abort` fires the body's signal (the cooperative step); an abort for a
  call not here yet is remembered and the call starts aborted;
- :meth:`BodyHost.interrupt` cancels an awaiting body's task, or injects
  :class:`ToolInterrupted` into a sync body's thread.

A call traced by OpenTelemetry carries its span's W3C ``traceparent`` in its identity: the
body runs with that span as its current context (a span it starts is the call's child).
A value is checked against the call's ``max_result_bytes`` (its ``ident``) here, where the
body ran: an oversized value fails ``RESULT_TOO_LARGE`` and never travels.

Definitions arrive as cloudpickle blobs with a key and are cached (least recently used
go first); a call whose key is unknown and carries no blob gets ``missing``. An error a body
raises leaves as data (:func:`~._outcome.error_data`), read here, where the body ran.
"""

from __future__ import annotations

import asyncio
import contextvars
import ctypes
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from toolray import AbortController, AbortSignal, ToolRunContext
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH, AbortError, OverloadedError
from toolray.farm import oversized
from toolray.lowlevel import activated, is_json

from ._outcome import MISSING, CallOutcome, ToolInterrupted, aborted, error_data

__all__ = ("BodyHost", "ContextFactory", "HostStats", "body_limit")

ContextFactory = Callable[[AbortSignal, Mapping[str, Any]], ToolRunContext]
"""Makes a body's run context from its signal and the call's identity (``ident``)."""

_MAX_DEFS = 256
"""Cached tool bodies (least recently used go first; the executor resends)."""

_MAX_EARLY = 4096
"""Aborts remembered for calls not arrived yet (a call that never arrives is forgotten)."""


def body_limit(threads: int) -> int:
    """How many bodies one worker runs at once (the worker actor's own concurrency)."""
    return max(threads, 8) + 8


@dataclass(frozen=True, slots=True, kw_only=True)
class HostStats:
    """A snapshot of one body host."""

    in_flight: int
    runs: int
    cached_definitions: int


@dataclass(eq=False)
class _Running:
    controller: AbortController
    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[Any] | None
    thread: int | None = None
    done: bool = False
    started: bool = False  # its body started (it holds a body slot)
    ended_at: float | None = None  # when a body thread's body returned or raised
    finished: bool = False  # the call's task has its body's value (or error)
    lock: threading.Lock = field(default_factory=threading.Lock)


class BodyHost:
    """Runs ``execute(args, ctx)`` bodies; aborts and interrupts them by token."""

    def __init__(
        self, context: ContextFactory, *, threads: int = 64, max_bodies: int | None = None
    ) -> None:
        self._context = context
        self._defs: OrderedDict[str, Any] = OrderedDict()
        self._running: dict[str, _Running] = {}
        self._early: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="toolray-body")
        self._slots = asyncio.Semaphore(max_bodies or body_limit(threads))
        self._runs = 0

    # ------------------------------------------------------------------ definitions
    def resolve(self, key: str, blob: bytes | None) -> Any:
        """The cached body of ``key`` (loading ``blob`` when given), or ``None``.

        Raises whatever unpickling ``blob`` raises (that call's failure, not the host's).
        """
        execute = self._defs.get(key)
        if execute is None:
            if blob is None:
                return None
            execute = cloudpickle.loads(blob).execute
            self.remember(key, execute)
        else:
            self._defs.move_to_end(key)
        return execute

    def remember(self, key: str, execute: Any) -> None:
        """Cache ``execute`` under ``key`` (a template preloads its children this way)."""
        self._defs[key] = execute
        self._defs.move_to_end(key)
        if len(self._defs) > _MAX_DEFS:
            self._defs.popitem(last=False)

    def bodies(self) -> dict[str, Any]:
        """Every cached body by key (another host can :meth:`remember` them)."""
        return dict(self._defs)

    def knows(self, key: str) -> bool:
        """Whether ``key``'s body is cached here."""
        return key in self._defs

    # ------------------------------------------------------------------ running
    async def run(
        self,
        token: str,
        key: str,
        blob: bytes | None,
        arguments: Any,
        ident: Mapping[str, Any],
        overdue: Callable[[], None] | None = None,
    ) -> CallOutcome:
        """Run one body; never raises for the body's own faults.

        A call that finds every body slot taken waits, at most its identity's
        ``max_queue_s`` (then ``OVERLOADED``); aborted meanwhile, it never starts. Its
        ``timeout_s`` counts from its body's start: past it ``overdue()`` is told.
        """
        try:
            execute = self.resolve(key, blob)
        except Exception as exc:  # a blob that does not load fails its own call only
            return CallOutcome(status="error", error=error_data(exc))
        if execute is None:
            return MISSING
        return await self.run_resolved(token, execute, arguments, ident, overdue)

    async def run_resolved(
        self,
        token: str,
        execute: Any,
        arguments: Any,
        ident: Mapping[str, Any],
        overdue: Callable[[], None] | None = None,
    ) -> CallOutcome:
        """:meth:`run` with the body already resolved."""
        running = _Running(AbortController(), asyncio.get_running_loop(), asyncio.current_task())
        with self._lock:
            self._running[token] = running
            early = self._early.pop(token, None)
            self._runs += 1
        if early is not None:
            running.controller.abort(early)
        ctx = self._context(running.controller.signal, ident)
        try:
            unstarted = await self._slot(running, ident)
            if unstarted is not None:
                return unstarted
            budget = _seconds(ident.get("timeout_s"))  # the body's own, from its start
            expiry = None
            if overdue is not None and budget is not None:
                deadline = running.loop.time() + budget
                expiry = running.loop.call_later(budget, _expired, running, deadline, overdue)
            try:
                with activated(ident.get("traceparent")):  # the body runs in its call's span
                    value = await self._body(running, execute, arguments, ctx)
            finally:
                running.finished = True
                if expiry is not None:
                    expiry.cancel()
                self._slots.release()
        except asyncio.CancelledError:
            if not running.started:
                return _unstarted("the call was interrupted while it waited for a body slot")
            contexts, concludes = ctx.collect()
            stopped = aborted("the worker interrupted the tool's task")
            return CallOutcome(
                status="error", error=stopped, contexts=contexts, concludes=concludes
            )
        except Exception as exc:
            contexts, concludes = ctx.collect()
            error = error_data(exc)
            return CallOutcome(status="error", error=error, contexts=contexts, concludes=concludes)
        finally:
            with self._lock:
                running.done = True
                self._running.pop(token, None)
        contexts, concludes = ctx.collect()
        if not is_json(value):
            return CallOutcome(status="not_json", contexts=contexts, concludes=concludes)
        too_large = oversized(str(ident.get("name")), value, ident.get("max_result_bytes"))
        if too_large is not None:  # an oversized value never leaves the process it came from
            return CallOutcome(
                status="error", error=error_data(too_large), contexts=contexts, concludes=concludes
            )
        return CallOutcome(status="ok", value=value, contexts=contexts, concludes=concludes)

    async def _slot(self, running: _Running, ident: Mapping[str, Any]) -> CallOutcome | None:
        """Take a body slot (``None``); a call that waited and may not start: its outcome."""
        if not self._slots.locked():
            await self._slots.acquire()  # free: no wait
        else:
            budget = _seconds(ident.get("max_queue_s"))
            try:
                await asyncio.wait_for(self._slots.acquire(), budget)
            except TimeoutError:
                error = OverloadedError(
                    f"no body slot within the pool's max_queue_ms ({(budget or 0) * 1000:g}ms left "
                    "when the call reached its worker); it never ran"
                )
                return CallOutcome(status="error", error=error_data(error))
            if running.controller.signal.aborted:
                self._slots.release()
                return _unstarted("the call was aborted while it waited for a body slot")
        running.started = True
        return None

    async def _body(self, running: _Running, execute: Any, arguments: Any, ctx: Any) -> Any:
        if inspect.iscoroutinefunction(execute):
            return await execute(arguments, ctx)
        thread_future = running.loop.run_in_executor(  # the thread sees this task's context
            self._pool,
            contextvars.copy_context().run,
            self._run_sync,
            running,
            execute,
            arguments,
            ctx,
        )
        try:
            value = await asyncio.shield(thread_future)
        except asyncio.CancelledError:
            await self._stop_thread(running, thread_future)
            raise
        if inspect.isawaitable(value):
            running.ended_at = None  # the body goes on in what it returned
            value = await value
        return value

    async def _stop_thread(self, running: _Running, thread_future: Any) -> None:
        """A cancelled call whose body is a thread: interrupt it and wait (bounded)."""
        if not thread_future.done():
            self._inject(running)
            await asyncio.wait({thread_future}, timeout=1.0)

    def _inject(self, running: _Running) -> bool:
        with running.lock:
            thread = running.thread
            if thread is None:
                return False
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread), ctypes.py_object(ToolInterrupted)
            )
            return True

    def _run_sync(self, running: _Running, execute: Any, arguments: Any, ctx: Any) -> Any:
        with running.lock:
            running.thread = threading.get_ident()
        try:
            return execute(arguments, ctx)
        finally:
            running.ended_at = time.monotonic()  # the loop's clock
            try:
                with running.lock:
                    running.thread = None
            except ToolInterrupted:  # an injection that landed after the body returned
                pass

    # ------------------------------------------------------------------ any thread
    def abort(self, token: str, reason: Any = None) -> bool:
        """Fire the body's signal; ``False`` if the call is not here yet (it starts aborted)."""
        with self._lock:
            running = self._running.get(token)
            if running is None:
                self._early[token] = reason
                if len(self._early) > _MAX_EARLY:
                    self._early.popitem(last=False)
                return False
        running.controller.abort(reason)
        return True

    def interrupt(self, token: str) -> str:
        """Cancel an awaiting body's task, or inject into a sync body's thread.

        Returns ``"injected"``, ``"cancelled"`` or ``"gone"`` (nothing to interrupt).
        """
        with self._lock:
            running = self._running.get(token)
        if running is None or running.done:
            return "gone"
        if self._inject(running):
            return "injected"
        if running.task is not None:
            running.loop.call_soon_threadsafe(running.task.cancel)
            return "cancelled"
        return "gone"

    def stats(self) -> HostStats:
        """A frozen snapshot of the counters."""
        with self._lock:
            return HostStats(
                in_flight=len(self._running), runs=self._runs, cached_definitions=len(self._defs)
            )

    def forget_runs(self) -> None:
        """Count no run so far (a warm-up's is not a call's)."""
        with self._lock:
            self._runs = 0

    def thread_count(self) -> int:
        """How many body threads the host has (any other thread was started by a body)."""
        return len(self._pool._threads)

    def close(self) -> None:
        """Stop the thread pool (running sync bodies finish in their threads)."""
        self._pool.shutdown(wait=False, cancel_futures=True)


def _unstarted(why: str) -> CallOutcome:
    err = AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)
    err.reason = why
    return CallOutcome(status="error", error=error_data(err))


def _seconds(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0.0, float(value))
    return None


def _expired(running: _Running, deadline: float, overdue: Callable[[], None]) -> None:
    """A body's budget ran out on its loop's clock: ``overdue()``, unless the body ended in time.

    In a starved process (hundreds of them on two cores) the loop may run this timer before
    the completion of a body that returned long before its deadline — a body thread's end is
    already queued, an async body's wake-up comes first in the next round — so it looks
    once more, one round later.
    """
    ended = running.ended_at
    if running.finished or (ended is not None and ended <= deadline):
        return
    running.loop.call_soon(_still_running, running, deadline, overdue)


def _still_running(running: _Running, deadline: float, overdue: Callable[[], None]) -> None:
    ended = running.ended_at
    if not running.finished and (ended is None or ended > deadline):
        overdue()
