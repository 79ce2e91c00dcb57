"""An environment instance's process: its state, and every call and operation on it.

With ``isolation="call"`` each environment instance lives in a process of its own, forked
from the worker's template (which already holds the environment's definition and its
tools' code). The worker sends it the instance's operations (:class:`EnvOp`: open,
restore, snapshot, run, park, close, fork) one at a time, and its calls (:class:`RunCall`),
several at once when they are concurrency-safe (the executor keeps the instance's turns);
each body sees the live state as ``ctx.environment``. Nested calls go out through the
worker, as a call process's do, so a nested call into this same instance runs here too,
inside its caller's turn.

``copy`` runs the definition's fork callable and answers the copy's snapshot; ``fork``
makes a copy-on-write copy of this process (its state as it is, whatever its
size): the serve loop stops, the process forks twice, the copy connects to the worker's
one-time abstract socket, the worker has the template adopt it, and then the intermediate
leaves: the copy is re-parented to the template (which reaps it, kills it on request and
takes it down with itself) and serves as an instance of its own. The worker
hanging up ends the process; so does ``park`` (after its snapshot) and ``close``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import inspect
import itertools
import os
import signal
import socket
import threading
import time
from collections.abc import Mapping
from typing import Any

import cloudpickle

from toolray import AbortSignal, EnvironmentDefinition, ToolRunContext
from toolray.lowlevel import restore_state, snapshot_state
from toolray.procs import ChildContext

from ._bodies import BodyHost
from ._child import MEMORY_EXIT, PRELOADED, Nested, limit_memory, nested_request
from ._context import context_from_ident
from ._env_messages import EnvDone, EnvOp, Parts, in_parts, unpack_restore
from ._messages import (
    AbortCall,
    CallDone,
    FrameReader,
    InterruptCall,
    Message,
    NestedAnswer,
    RunCall,
    encode,
)
from ._outcome import CallOutcome, error_data
from ._reaper import become_subreaper, kill_descendants, stop_subreaping

__all__ = ("serve_instance",)

_READ = 1 << 16
_BODIES = 16
"""Bodies of one instance that may run at once (its concurrency-safe calls, and nested)."""
_PR_SET_PDEATHSIG = 1
_REPARENT_WAIT_S = 5.0
_ENDING_OPS = ("park", "close")


class _Instance:
    """One instance's process: its socket, its state, its bodies."""

    def __init__(self, sock: socket.socket, definitions: Mapping[str, Any]) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()
        self._reader = FrameReader("worker")
        self._backlog: list[Message] = []
        self._parts = Parts()
        self._definitions = dict(definitions)
        self.host = self._new_host()
        self.definition: EnvironmentDefinition | None = None
        self.state: Any = None
        self._ids = itertools.count(1)
        self._pending: dict[int, concurrent.futures.Future[NestedAnswer]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._stop: asyncio.Future[EnvOp | None] | None = None

    def _new_host(self, old: BodyHost | None = None) -> BodyHost:
        host = BodyHost(self._context, threads=_BODIES, max_bodies=_BODIES)
        known = old.bodies() if old is not None else {}
        for key, body in {**self._definitions, **known}.items():
            if not isinstance(body, EnvironmentDefinition):
                host.remember(key, body)
        return host

    def _context(self, signal_: AbortSignal, ident: Mapping[str, Any]) -> ToolRunContext:
        ctx = context_from_ident(signal_, ident, Nested(self))
        ctx._environment = self.state
        return ctx

    def send(self, message: Message) -> None:
        """Write one frame (from the loop, a body's thread, or between loops)."""
        frame = encode(message)
        with self._send_lock:
            self.sock.sendall(frame)

    def ask(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> concurrent.futures.Future[NestedAnswer]:
        """Send a body's nested request; the future gets its answer (thread-safe)."""
        answer: concurrent.futures.Future[NestedAnswer] = concurrent.futures.Future()
        ident = next(self._ids)
        self._pending[ident] = answer
        try:
            self.send(nested_request(ident, ctx, name, arguments, call_id))
        except ValueError as err:  # lossless JSON deeper than a frame may nest, say
            self._pending.pop(ident, None)
            raise ValueError(f"the nested call's arguments {err}") from None
        return answer

    # ------------------------------------------------------------------ the loop
    async def serve(self) -> EnvOp | None:
        """Serve until the worker hangs up or the instance ends (``None``), or a fork."""
        loop = asyncio.get_running_loop()
        self._stop = loop.create_future()
        backlog, self._backlog = self._backlog, []
        for message in backlog:
            self._handle(message)
        loop.add_reader(self.sock.fileno(), self._readable)
        try:
            return await self._stop
        finally:
            loop.remove_reader(self.sock.fileno())

    def _end(self, fork: EnvOp | None = None) -> None:
        if self._stop is not None and not self._stop.done():
            self._stop.set_result(fork)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(_READ, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the worker hung up: this instance is done
            self._end()
            return
        messages = self._reader.feed(data)
        for i, message in enumerate(messages):
            if isinstance(message, EnvOp) and message.op == "fork" and not message.more:
                self._backlog = messages[i + 1 :]  # served after the fork, in order
                self._end(message)
                return
            self._handle(message)

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _handle(self, message: Message) -> None:
        match message:
            case RunCall():
                self._spawn(self._run(message))
            case AbortCall():
                self.host.abort(message.token, message.reason)
            case InterruptCall():
                self.host.interrupt(message.token)
            case NestedAnswer():
                pending = self._pending.pop(message.id, None)
                if pending is not None and not pending.done():
                    pending.set_result(message)
            case EnvOp():
                whole = self._parts.join(message)
                if isinstance(whole, EnvOp):
                    self._spawn(self._operate(whole))
            case _:
                raise ValueError(f"an instance's process does not take {type(message).__name__}")

    async def _run(self, call: RunCall) -> None:
        started = time.perf_counter()
        try:
            execute = self.host.resolve(call.key, call.blob)
        except Exception as exc:  # a blob that does not load fails its own call only
            outcome = CallOutcome(status="error", error=error_data(exc))
        else:
            if execute is None:
                outcome = CallOutcome(status="missing")
            else:
                outcome = await self.host.run_resolved(
                    call.token, execute, call.arguments, call.ident
                )
        body_s = time.perf_counter() - started
        try:
            self.send(CallDone(token=call.token, outcome=outcome, clean=True, body_s=body_s))
        except ValueError as err:  # its value (or error) cannot leave: that is its failure
            failed = CallOutcome(
                status="error", error=error_data(RuntimeError(f"the tool's result {err}"))
            )
            self.send(CallDone(token=call.token, outcome=failed, clean=True))

    # ------------------------------------------------------------------ operations
    async def _operate(self, op: EnvOp) -> None:
        try:
            data = await self._do(op)
        except Exception as err:
            text = str(err) or type(err).__name__
            self.send(EnvDone(op=op.op, ok=False, error=text[:200]))
            return
        for part in in_parts(EnvDone(op=op.op, ok=True, data=data)):
            self.send(part)
        if op.op in _ENDING_OPS:
            self._end()

    def _definition_of(self, key: str, blob: bytes | None) -> EnvironmentDefinition:
        found = self._definitions.get(key)
        if isinstance(found, EnvironmentDefinition):
            return found
        if blob is None:
            raise LookupError(f"the environment's definition {key!r} did not arrive")
        definition = cloudpickle.loads(blob)
        if not isinstance(definition, EnvironmentDefinition):
            raise TypeError(f"{key!r} is not an environment's definition")
        return definition

    async def _do(self, op: EnvOp) -> bytes | None:
        if op.op == "open":
            definition = self._definition_of(op.key, op.data)
            self.state = await _inline(definition.create, op.config)
            self.definition = definition
            return None
        if op.op == "restore":
            blob, snapshot = unpack_restore(op.data or b"")
            definition = self._definition_of(op.key, blob)
            self.state = restore_state(definition, snapshot)
            self.definition = definition
            return None
        if self.definition is None:
            raise LookupError("the instance was never opened")
        definition = self.definition
        if op.op in ("snapshot", "park"):
            return snapshot_state(definition, self.state)
        if op.op == "run":
            fn, args = cloudpickle.loads(op.data or b"")
            value = await _inline(fn, self.state, *args)
            return bytes(cloudpickle.dumps(value))
        if op.op == "close":
            if definition.close is not None:
                await _inline(definition.close, self.state)
            return None
        if op.op == "copy":  # a fork by the definition's callable: the copy as a snapshot
            assert callable(definition.fork)
            copy = await _inline(definition.fork, self.state)
            return snapshot_state(definition, copy)
        raise ValueError(f"unknown operation {op.op!r}")

    # ------------------------------------------------------------------ fork
    def fork(self, op: EnvOp) -> bool:
        """Between loops: copy this process (``True`` in the copy, which then serves)."""
        template = os.getppid()
        stop_subreaping()  # the copy goes to the template when its intermediate leaves
        pipe_r, pipe_w = os.pipe()
        first = os.fork()
        if first == 0:  # the intermediate: fork the copy, say its pid, leave when it says
            os.close(pipe_r)
            hold_r, hold_w = os.pipe()
            copy = os.fork()
            if copy == 0:
                os.close(pipe_w)
                os.close(hold_r)
                return self._become_copy(op, template, hold_w)
            os.close(hold_w)
            os.write(pipe_w, copy.to_bytes(8, "big"))
            os.close(pipe_w)
            with contextlib.suppress(OSError):
                os.read(hold_r, 1)  # the template has adopted it (or it is gone)
            os._exit(0)
        os.close(pipe_w)
        with os.fdopen(pipe_r, "rb") as pipe:
            raw = pipe.read(8)
        pid = int.from_bytes(raw, "big") if len(raw) == 8 else 0
        if pid:
            self.send(EnvDone(op="fork", ok=True, pid=pid))
        else:
            self.send(EnvDone(op="fork", ok=False, error="the copy could not be forked"))
        with contextlib.suppress(ChildProcessError):
            os.waitpid(first, 0)  # until the worker has had the template adopt the copy
        become_subreaper()
        return False

    def _become_copy(self, op: EnvOp, template: int, hold: int) -> bool:
        """In the copy: a child of the template, its own group, its own socket and bodies.

        It connects to the worker first; once the worker has had the template adopt it
        (its ``go``), it lets the intermediate leave and waits to be the template's child.
        """
        try:
            os.setpgid(0, 0)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect("\0" + op.address)
            sock.sendall(os.getpid().to_bytes(8, "big"))
            if sock.recv(1) != b"\1":
                os._exit(1)  # the worker did not take it
            os.close(hold)  # the intermediate leaves: the template adopts this process
            deadline = time.monotonic() + _REPARENT_WAIT_S
            while os.getppid() != template and time.monotonic() < deadline:
                time.sleep(0.0005)
            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != template:
                os._exit(1)  # the template is gone: so is the worker
            become_subreaper()  # what the copy starts is its own (not inherited by a fork)
        except BaseException:
            os._exit(1)
        with contextlib.suppress(OSError):
            self.sock.close()
        self.sock = sock
        self._send_lock = threading.Lock()
        self._reader = FrameReader("worker")
        self._backlog = []
        self._parts = Parts()
        self._pending = {}
        self._tasks = set()
        return True

    def renew(self) -> None:
        """After a fork (in both): fresh bodies' threads for the next loop (same code)."""
        old = self.host
        self.host = self._new_host(old)
        old.close()


async def _inline(fn: Any, *args: Any) -> Any:
    """An environment's own function, on this process's loop thread.

    An operation has the instance to itself (no call of it runs meanwhile), so a sync one
    runs right here: no thread started for it, which costs memory in every instance.
    """
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


def serve_instance(ctx: ChildContext) -> int:
    """An instance's process (a ``toolray.procs`` child): limits, then its life.

    It is a child subreaper: what the instance starts (a shell session, a daemon that left
    its group) stays below it for the instance's life, and is killed when it ends.
    """
    limit_memory(int(ctx.args["memory_mb"]))
    become_subreaper()
    instance = _Instance(socket.socket(fileno=ctx.channel), PRELOADED)
    try:
        while True:
            fork = asyncio.run(instance.serve())
            if fork is None:
                return 0
            instance.fork(fork)
            instance.renew()
    except MemoryError:
        return MEMORY_EXIT
    finally:
        kill_descendants()
