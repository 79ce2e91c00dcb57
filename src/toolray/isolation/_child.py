"""The call process: runs the bodies its worker sends, one call at a time.

Its main thread runs an event loop that reads the worker's frames: :class:`RunCall` starts
the body on a :class:`BodyHost` (async bodies as a task, sync bodies in a thread), while
:class:`AbortCall` and :class:`InterruptCall` keep arriving and reach the running body —
the first two steps of the cancellation ladder; the third is the worker killing this
process's group. A body's ``ctx.dispatch`` becomes a :class:`NestedRequest` to the worker,
which asks the call's executor and sends the :class:`NestedAnswer` back.

After each call the process says whether it is still clean — not interrupted, no thread,
task or process left behind by the body (a thread declared with ``toolray._held``, such as
an MCP connector's, is the process's own), its memory not grown past half its allowance —
and the worker reuses it only then (retiring it kills its process group: what the body
started). A body that runs out of memory ends the process with :data:`MEMORY_EXIT` (the
worker reports the call lost to its memory limit); the worker hanging up ends it normally.

It is a child of a ``toolray.procs`` template: :func:`serve_call` is its entry, and
:func:`preload` the template's loader, which unpickles each tool's definition once in the
template so every call process forked afterwards holds it (and the modules it imported).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import io
import itertools
import os
import resource
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Protocol

import cloudpickle

from toolray import AbortSignal, EnvironmentDefinition, ToolExecutionResult, ToolRunContext
from toolray._held import held_threads
from toolray.lowlevel import is_json
from toolray.procs import ChildContext

from ._bodies import BodyHost
from ._context import context_from_ident, refuse_in_loop
from ._messages import (
    AbortCall,
    CallDone,
    CallOverdue,
    FrameReader,
    InterruptCall,
    Message,
    NestedAnswer,
    NestedRequest,
    RunCall,
    encode,
)
from ._outcome import CallOutcome, ErrorData, error_data, rebuild_error
from ._reaper import become_subreaper, kill_descendants

__all__ = (
    "MEMORY_EXIT",
    "PRELOADED",
    "Asker",
    "Nested",
    "limit_memory",
    "nested_request",
    "preload",
    "serve_call",
)

MEMORY_EXIT = 86
"""The exit status of a call process whose body ran out of memory."""

_READ = 1 << 16


class Asker(Protocol):
    """A process that sends a body's nested request to its worker (the answer comes later)."""

    def ask(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> concurrent.futures.Future[NestedAnswer]:
        """Send the request; the future gets its answer."""
        ...


class Nested:
    """The ``NestedDispatcher`` of a body here: its nested calls go through the worker."""

    __slots__ = ("_child",)

    def __init__(self, child: Asker) -> None:
        self._child = child

    async def dispatch(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """Ask the worker (and through it the executor); await the answer."""
        answer = await asyncio.wrap_future(self._child.ask(ctx, name, arguments, call_id))
        return _result(answer)

    def dispatch_sync(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """:meth:`dispatch` from a sync body's thread (blocks it until the answer)."""
        refuse_in_loop("the body's")
        return _result(self._child.ask(ctx, name, arguments, call_id).result())


def _result(answer: NestedAnswer) -> ToolExecutionResult:
    if answer.error is not None:
        raise rebuild_error(answer.error)
    assert answer.result is not None
    return answer.result


class _Child:
    """One call process's state: its socket, its body host, the call in progress."""

    def __init__(self, sock: socket.socket, definitions: Mapping[str, Any], allowance: int):
        self._sock = sock
        self._send_lock = threading.Lock()
        self._reader = FrameReader("worker")
        self._host = BodyHost(self._context, threads=1, max_bodies=1)
        for key, execute in definitions.items():
            self._host.remember(key, execute)
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[NestedAnswer]] = {}
        self._tainted = False
        self._task: asyncio.Task[None] | None = None
        self._main: asyncio.Task[Any] | None = None
        self._ended: asyncio.Future[None] | None = None
        self._memory_ceiling = _max_rss() + allowance // 2

    def _context(self, signal: AbortSignal, ident: Mapping[str, Any]) -> ToolRunContext:
        return context_from_ident(signal, ident, Nested(self))

    def send(self, message: Message) -> None:
        """Write one frame (from the loop or a body's thread)."""
        frame = encode(message)
        with self._send_lock:
            self._sock.sendall(frame)

    def ask(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> concurrent.futures.Future[NestedAnswer]:
        """Send a nested request; the future gets its answer (thread-safe)."""
        answer: concurrent.futures.Future[NestedAnswer] = concurrent.futures.Future()
        ident = next(self._ids)
        self._pending[ident] = answer
        request = nested_request(ident, ctx, name, arguments, call_id)
        try:
            self.send(request)
        except ValueError as err:  # lossless JSON deeper than a frame may nest, say
            self._pending.pop(ident, None)
            raise ValueError(f"the nested call's arguments {err}") from None
        return answer

    # ------------------------------------------------------------------ the loop
    async def serve(self, ready: Message | None = None) -> None:
        loop = asyncio.get_running_loop()
        self._main = asyncio.current_task()
        self._ended = loop.create_future()
        if ready is not None:  # a process that takes one call: its first is its only one
            await self._warm_up()
            self.send(ready)
        loop.add_reader(self._sock.fileno(), self._readable)
        try:
            await self._ended
        finally:
            loop.remove_reader(self._sock.fileno())

    async def _warm_up(self) -> None:
        """Run the machinery of a call once (a thread, the runner, the codec), on nothing.

        A forked process copies each page its parent shares as it first writes it: done
        here, before the process says it is ready, not on its one call's time.
        """
        outcome = await self._host.run_resolved("", _nothing, {}, {"name": ""})
        encode(CallDone(token="", outcome=outcome, clean=self._clean()))
        self._host.forget_runs()

    def _readable(self) -> None:
        try:
            data = self._sock.recv(_READ, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the worker hung up: this process is done
            self._end()
            return
        for message in self._reader.feed(data):
            self._handle(message)

    def _end(self) -> None:
        if self._ended is not None and not self._ended.done():
            self._ended.set_result(None)

    def _handle(self, message: Message) -> None:
        match message:
            case RunCall():
                self._task = asyncio.ensure_future(self._run(message))
            case AbortCall():
                self._host.abort(message.token, message.reason)
            case InterruptCall():
                if self._host.interrupt(message.token) != "gone":
                    self._tainted = True
            case NestedAnswer():
                pending = self._pending.pop(message.id, None)
                if pending is not None and not pending.done():
                    pending.set_result(message)
            case _:  # a body's record, or an instance's (its reader lets none through)
                raise ValueError(f"a call process does not take {type(message).__name__}")

    async def _run(self, call: RunCall) -> None:
        body_s = 0.0
        try:
            execute = self._host.resolve(call.key, call.blob)  # a first call loads the tool
        except Exception as exc:  # a blob that does not load fails its own call only
            outcome = CallOutcome(status="error", error=error_data(exc))
        else:
            if execute is None:
                outcome = CallOutcome(status="missing")
            else:
                started = time.perf_counter()
                overdue = functools.partial(self.send, CallOverdue(token=call.token))
                outcome = await self._host.run_resolved(  # its timeout_s counts from here
                    call.token, execute, call.arguments, call.ident, overdue
                )
                body_s = time.perf_counter() - started
        if _is_memory_error(outcome.error):
            os._exit(MEMORY_EXIT)  # its state is suspect: the worker reports the limit
        left = kill_descendants()  # what the body started dies with its call
        clean = not left and self._clean()
        try:
            self.send(
                CallDone(token=call.token, outcome=outcome, clean=clean, body_s=body_s, left=left)
            )
        except ValueError as err:  # its value (or error) cannot leave: that is its failure
            failed = CallOutcome(
                status="error", error=error_data(RuntimeError(f"the tool's result {err}"))
            )
            self.send(CallDone(token=call.token, outcome=failed, clean=clean, left=left))

    def _clean(self) -> bool:
        if self._tainted:
            return False
        if threading.active_count() > 1 + self._host.thread_count() + held_threads():
            return False  # a thread the body started is still running (not one it keeps)
        tasks = {asyncio.current_task(), self._main}
        if any(t not in tasks for t in asyncio.all_tasks()):
            return False  # so is a task
        if not _no_children():
            return False  # so is a process it started (one that could not be killed)
        return _max_rss() <= self._memory_ceiling


def nested_request(
    ident: int, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
) -> NestedRequest:
    """A body's nested call as it leaves: its arguments lossless JSON, or marked as not."""
    token = ctx.token.id if ctx.token is not None else ""
    request = NestedRequest(
        id=ident, token=token, name=name, arguments=None, call_id=call_id, not_json=True
    )
    try:
        if is_json(arguments):  # anything else never leaves: the pipeline rejects it
            request = dataclasses.replace(request, arguments=arguments, not_json=False)
    except Exception as exc:  # inspecting them raised: that error is the call's failure
        request = dataclasses.replace(request, invalid=error_data(exc))
    return request


def _nothing(arguments: object, ctx: object) -> None:
    """The body of a warm-up."""


def _is_memory_error(error: ErrorData | None) -> bool:
    return error is not None and (error.module, error.name) == ("builtins", "MemoryError")


def _no_children() -> bool:
    """Whether no process this one started still runs (the ended ones are reaped here)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True  # none at all
        if pid == 0:
            return False  # one still runs


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


PRELOADED: OrderedDict[str, Any] = OrderedDict()
"""The template's definitions, inherited by every call process it forks: a tool's key → its
body, an environment's key → its whole definition."""

_MAX_PRELOADED = 256


def preload(key: str, blob: bytes | None) -> None:
    """The template's loader: unpickle a definition once, for every later call process.

    Unpickling imports what the tool's code needs, so that cost too is paid once, here.
    """
    if blob is None:
        return
    definition = cloudpickle.loads(blob)
    whole = isinstance(definition, EnvironmentDefinition)
    PRELOADED[key] = definition if whole else definition.execute
    PRELOADED.move_to_end(key)
    if len(PRELOADED) > _MAX_PRELOADED:
        PRELOADED.popitem(last=False)


def _data_size() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def limit_memory(memory_mb: int) -> int:
    """A child's limits: ``memory_mb`` beyond the template, no core dumps; the allowance.

    The data segment is limited (``RLIMIT_DATA``; no cgroup is assumed), so a runaway body
    fails with ``MemoryError``. A body's prints go where its worker's stderr goes (line by
    line: a kill loses none).
    """
    os.dup2(2, 1)  # the template's stdout is discarded; the worker's stderr is its log
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    allowance = memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    limit = _data_size() + allowance
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    return allowance


def serve_call(ctx: ChildContext) -> int:
    """A call process's entry (``toolray.procs``): limits, then calls until the worker hangs up.

    ``ctx.args["memory_mb"]`` is what a call may allocate beyond the template
    (:func:`limit_memory`): a runaway body ends this process with :data:`MEMORY_EXIT`.
    """
    allowance = limit_memory(int(ctx.args["memory_mb"]))
    return serve_confined(socket.socket(fileno=ctx.channel), allowance)


def serve_confined(sock: socket.socket, allowance: int, ready: Message | None = None) -> int:
    """Serve the worker's calls on ``sock`` until it hangs up (the limits are in place).

    With ``ready`` (a sandbox's report) the process warms up, then sends it, then serves.
    """
    become_subreaper()  # what a body starts stays below this process, to be killed
    try:
        asyncio.run(_Child(sock, PRELOADED, allowance).serve(ready))
    except MemoryError:
        return MEMORY_EXIT
    return 0
