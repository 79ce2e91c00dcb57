"""``ToolWorker``: runs tool bodies only; serves aborts while a body runs.

A plain class (testable without Ray); ``_handles`` turns it into an async actor whose
``abort`` / ``interrupt`` / ``status`` / ``health`` run on a separate ``control`` lane, which
is the only way to reach a busy worker in milliseconds (RAY-NOTES §3). Because that lane is
another thread with its own loop, everything shared here is guarded by a lock, and the run
loop is reached with ``call_soon_threadsafe``.

Outcomes are tuples (cheap to ship): ``("ok", value, contexts, concludes)``,
``("error", exc, contexts, concludes)``, ``("not_json", None, contexts, concludes)``,
``("missing",)`` when the definition is not cached here and no blob came with the call.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import inspect
import os
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from toolray import AbortController, AbortError, HarnessError
from toolray.farm import oversized
from toolray.lowlevel import is_json

from ._nested_remote import worker_context
from ._stats import ActorStats, actor_stats

__all__ = ("ToolInterrupted", "ToolWorker", "WorkerStatus", "body_limit")

Request = tuple[str, str, bytes | None, Any, dict[str, Any]]
Outcome = tuple[Any, ...]

_INTERRUPTED = "the worker interrupted the tool's thread"

_MAX_DEFS = 256
"""Cached tool bodies per worker (least recently used go first; the executor resends)."""

_MAX_EARLY = 4096
"""Aborts remembered for calls not arrived yet (a call that never arrives is forgotten)."""


_UNRESOLVED: Any = object()


def body_limit(threads: int) -> int:
    """How many bodies one worker runs at once (the worker actor's own concurrency)."""
    return max(threads, 8) + 8


def _outcome_of(token: str, task: asyncio.Task[Outcome]) -> tuple[str, Outcome]:
    if task.cancelled():  # cancelled before its body started (the message was abandoned)
        stopped = AbortError("tool call aborted")
        stopped.reason = "the call was cancelled before it started"
        return token, ("error", stopped, (), False)
    err = task.exception()
    if err is not None:  # a fault of the worker itself: this call's failure, not the message's
        return token, ("error", _shippable(err), (), False)
    return token, task.result()


class ToolInterrupted(AbortError):
    """Injected into a sync body's thread when cooperation did not stop it."""

    def __init__(self) -> None:
        super().__init__("tool call aborted")
        self.reason = _INTERRUPTED


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerStatus:
    """A snapshot of one worker."""

    pid: int
    in_flight: int
    runs: int
    cached_definitions: int
    idle_s: float = 0.0
    """Seconds since the worker last started or finished a call (0 while one runs)."""


@dataclass(eq=False)
class _Running:
    controller: AbortController
    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[Any] | None
    thread: int | None = None
    done: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class RemoteHarnessError(HarnessError):
    """Stands in for a coded error whose own class cannot travel; keeps its name and code."""

    def __init__(self, message: str, code: str, name: str) -> None:
        super().__init__(message, code)
        self.original_name = name

    @property
    def name(self) -> str:
        """The original error's class name (the ``info.name`` the executor reports)."""
        return self.original_name


def _shippable(exc: BaseException) -> BaseException:
    """``exc`` if it survives the trip back (cloudpickle, like Ray), else a faithful stand-in."""
    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        if isinstance(exc, HarnessError):
            stand_in = RemoteHarnessError(exc.message, exc.code, exc.name)
            stand_in.reason = exc.reason
            return stand_in
        return RuntimeError(str(exc) or type(exc).__name__)
    return exc


class ToolWorker:
    """Runs ``execute(args, ctx)`` for the executor actors that dispatch to it."""

    def __init__(self, threads: int = 64) -> None:
        self._defs: OrderedDict[str, Any] = OrderedDict()  # LRU, at most _MAX_DEFS
        self._running: dict[str, _Running] = {}
        self._early_aborts: OrderedDict[str, Any] = OrderedDict()  # at most _MAX_EARLY
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="toolray-body")
        self._slots = asyncio.Semaphore(body_limit(threads))
        self._runs = 0
        self._last = time.monotonic()  # the last start or end of a call
        self._draining = False  # retired by an elastic pool: calls go elsewhere

    # ------------------------------------------------------------------ default lane
    async def run(self, request: Request) -> Outcome:
        """Run one body; never raises for the body's own faults.

        ``request`` is ``(token, key, blob, arguments, ident)`` packed in one argument (one
        serialized value per call is measurably cheaper for the executor than five).
        """
        return await self._run_one(request)

    async def run_many(self, requests: list[Request]) -> AsyncIterator[list[tuple[str, Outcome]]]:
        """Run a coalesced message: each body in its own task; outcomes as they settle.

        Yields ``[(token, outcome), …]`` chunks: the outcomes that settled in the same loop
        tick travel together. Definitions are resolved in request order before any body
        starts, so the first request of a key carries its blob for its mates. Each call
        stays addressable on the control lane by its token (abort, interrupt) without
        touching its mates.
        """
        settled: asyncio.Queue[tuple[str, asyncio.Task[Outcome]]] = asyncio.Queue()
        tasks = []
        for request in requests:
            try:
                execute = self._resolve(request)
            except Exception as exc:  # a blob that does not load fails its own call only
                execute = exc
            task = asyncio.ensure_future(self._run_one(request, execute))
            task.add_done_callback(functools.partial(_settle, settled, request[0]))
            tasks.append(task)
        left = len(tasks)
        try:
            while left:
                chunk = [_outcome_of(*await settled.get())]
                await asyncio.sleep(0)  # outcomes settling in this tick join the chunk
                while not settled.empty():
                    chunk.append(_outcome_of(*settled.get_nowait()))
                left -= len(chunk)
                yield chunk
        finally:
            for task in tasks:  # the message was abandoned (its caller is gone)
                if not task.done():
                    task.cancel()

    def _resolve(self, request: Request) -> Any:
        """The cached body of the request's key (loading its blob), or ``None``."""
        _, key, blob, _, _ = request
        execute = self._defs.get(key)
        if execute is None:
            if blob is None:
                return None
            execute = cloudpickle.loads(blob).execute
            self._defs[key] = execute
            if len(self._defs) > _MAX_DEFS:
                self._defs.popitem(last=False)
        else:
            self._defs.move_to_end(key)
        return execute

    async def _run_one(self, request: Request, execute: Any = _UNRESOLVED) -> Outcome:
        token, _, _, arguments, ident = request
        if self._draining:
            return ("retired",)  # its executor sends the call to another worker, unstarted
        if execute is _UNRESOLVED:
            execute = self._resolve(request)
        if execute is None:
            return ("missing",)
        if isinstance(execute, Exception):
            return ("error", _shippable(execute), (), False)
        running = _Running(AbortController(), asyncio.get_running_loop(), asyncio.current_task())
        with self._lock:
            self._running[token] = running
            early = self._early_aborts.pop(token, None)
            self._runs += 1
            self._last = time.monotonic()
        if early is not None:
            running.controller.abort(early)
        ctx = worker_context(running.controller.signal, ident)  # nested calls: its executor
        try:
            async with self._slots:  # the per-worker body limit (many bodies per message)
                value = await self._body(running, execute, arguments, ctx)
        except asyncio.CancelledError:
            contexts, concludes = ctx.collect()
            stopped = AbortError("tool call aborted")
            stopped.reason = "the worker interrupted the tool's task"
            return ("error", stopped, contexts, concludes)
        except Exception as exc:
            contexts, concludes = ctx.collect()
            return ("error", _shippable(exc), contexts, concludes)
        finally:
            with self._lock:
                running.done = True
                self._running.pop(token, None)
                self._last = time.monotonic()
        contexts, concludes = ctx.collect()
        if not is_json(value):
            return ("not_json", None, contexts, concludes)
        too_large = oversized(str(ident.get("name")), value, ident.get("max_result_bytes"))
        if too_large is not None:  # an oversized value never leaves the worker
            return ("error", too_large, contexts, concludes)
        return ("ok", value, contexts, concludes)

    async def _body(self, running: _Running, execute: Any, arguments: Any, ctx: Any) -> Any:
        if inspect.iscoroutinefunction(execute):
            return await execute(arguments, ctx)
        thread_future = running.loop.run_in_executor(
            self._pool, self._run_sync, running, execute, arguments, ctx
        )
        try:
            value = await asyncio.shield(thread_future)
        except asyncio.CancelledError:
            await self._stop_thread(running, thread_future)
            raise
        if inspect.isawaitable(value):
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
            try:
                with running.lock:
                    running.thread = None
            except ToolInterrupted:  # an injection that landed after the body returned
                pass

    # ------------------------------------------------------------------ control lane
    async def abort(self, token: str, reason: Any = None) -> bool:
        """Fire the body's signal (cooperative step); ``False`` if the call is not here yet."""
        with self._lock:
            running = self._running.get(token)
            if running is None:  # the call is on its way: it starts aborted
                self._early_aborts[token] = reason
                if len(self._early_aborts) > _MAX_EARLY:
                    self._early_aborts.popitem(last=False)
                return False
        running.controller.abort(reason)
        return True

    async def abort_many(self, items: list[tuple[str, Any]]) -> int:
        """:meth:`abort` for several calls at once (a batch aborted as a whole)."""
        found = 0
        for token, reason in items:
            found += await self.abort(token, reason)
        return found

    async def interrupt(self, token: str) -> str:
        """Stronger step: cancel an awaiting body's task, or inject into a sync body's thread."""
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

    async def status(self) -> WorkerStatus:
        """Counters for the pool and the runtime statistics."""
        with self._lock:
            busy = bool(self._running)
            return WorkerStatus(
                pid=os.getpid(),
                in_flight=len(self._running),
                runs=self._runs,
                cached_definitions=len(self._defs),
                idle_s=0.0 if busy else time.monotonic() - self._last,
            )

    async def drain(self) -> int:
        """Take no more calls (they are answered "retired"); returns the calls still running."""
        with self._lock:
            self._draining = True
            return len(self._running)

    async def actor_stats(self) -> ActorStats:
        """This worker's identity and footprint."""
        return actor_stats("worker", f"worker:{os.getpid()}", 0)

    async def health(self) -> int:
        """The worker's pid (it answers even while bodies run)."""
        return os.getpid()


def _settle(settled: Any, token: str, task: asyncio.Task[Any]) -> None:
    settled.put_nowait((token, task))
