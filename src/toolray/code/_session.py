"""One run on one child: send the program, serve its binding calls, settle exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import signal as signals
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from toolray import AbortSignal, JsonValue, TimeoutReason, snapshot_json
from toolray.errors import NotJsonError, ToolTimeoutError

from ._failures import abort_error, exit_status, failure_message, last_line, memory_text, seconds
from ._frames import MAX_FRAME_BYTES, FrameDecoder, ProtocolError, encode_frame
from ._process import ChildProcess
from ._types import (
    KIND_CPU,
    KIND_INVALID_OUTPUT,
    KIND_MEMORY,
    KIND_OUTPUT_LIMIT,
    KIND_PROTOCOL,
    KIND_WORKER_EXIT,
    Binding,
    CodeRunOutcome,
    code_run_failed,
)

__all__ = ("EXIT_MEMORY", "LOG_BUDGET", "RunLimits", "run_on_child")

LOG_BUDGET: Final = 1024 * 1024
"""Bytes of ``logs`` kept per run (the child stops sending at the same budget)."""
LOG_MARKER: Final = f"[toolray.code] log capture truncated at {LOG_BUDGET} bytes"
BOOT_TIMEOUT_S: Final = 30.0
"""How long a child may take to boot and start the program (a warm one has booted)."""
EXIT_MEMORY: Final = 86
"""The child's exit status when it could not even report a ``MemoryError``."""
_CHILD_KINDS: Final = frozenset(
    {"syntax", "exception", "import", "invalid-output", "output-limit", "memory"}
)
_STDERR_TAIL: Final = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLimits:
    """What the child is told to enforce, and the host's deadline."""

    timeout_s: float | None
    memory_mb: int | None
    cpu_s: float | None
    allowed_imports: frozenset[str]


class _Pipe(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> None:
        self._on_eof()

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


@final
class _Run:
    def __init__(
        self, child: ChildProcess, bindings: Mapping[str, Binding], limits: RunLimits
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.child = child
        self.bindings = bindings
        self.limits = limits
        self.settled: asyncio.Future[CodeRunOutcome] = self.loop.create_future()
        self.logs: list[str] = []
        self.log_bytes = 0
        self.call_ids: set[int] = set()
        self.calls: set[asyncio.Task[None]] = set()
        self.decoder = FrameDecoder()
        self.stderr_tail = bytearray()
        self.writer: asyncio.WriteTransport | None = None
        self.transports: list[asyncio.BaseTransport] = []
        self.deadline: asyncio.TimerHandle | None = None
        self.eof_seen = False
        self.started = False

    async def connect(self, program: str) -> None:
        stdin, stdout, stderr = self.child.pipes()
        out, _ = await self.loop.connect_read_pipe(lambda: _Pipe(self.on_data, self.on_eof), stdout)
        err, _ = await self.loop.connect_read_pipe(lambda: _Pipe(self.on_stderr, _noop), stderr)
        self.writer, _ = await self.loop.connect_write_pipe(asyncio.Protocol, stdin)
        self.transports = [out, err, self.writer]
        names = [[name, _parameter_names(b)] for name, b in self.bindings.items()]
        limits = self.limits
        memory = None if limits.memory_mb is None else limits.memory_mb * 1024 * 1024
        run: dict[str, Any] = {"op": "run", "program": program, "bindings": names}
        run |= {"memory_bytes": memory, "cpu_s": limits.cpu_s}
        run["allowed"] = sorted(limits.allowed_imports)
        try:
            self.writer.write(encode_frame(run))
        except ValueError as err:
            self.fail(code_run_failed(KIND_OUTPUT_LIMIT, f"the program does not fit: {err}"))
        self.deadline = self.loop.call_later(BOOT_TIMEOUT_S, self.on_boot_timeout)

    # -- settling -------------------------------------------------------------------------
    def succeed(self, outcome: CodeRunOutcome) -> None:
        if not self.settled.done():
            self.settled.set_result(outcome)
            self.stop()

    def fail(self, err: BaseException) -> None:
        if not self.settled.done():
            self.settled.set_exception(err)
            self.stop()

    def stop(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
        self.child.kill()

    def close(self) -> None:
        if not self.settled.done():  # the host task was cancelled: nothing will read it
            self.settled.cancel()
        self.stop()
        for transport in self.transports:
            transport.close()

    # -- the child's output ---------------------------------------------------------------
    def on_stderr(self, data: bytes) -> None:
        self.stderr_tail += data
        del self.stderr_tail[:-_STDERR_TAIL]

    def on_data(self, data: bytes) -> None:
        if self.settled.done():
            return
        try:
            frames = self.decoder.feed(data)
            for frame in frames:
                self.on_frame(frame)
                if self.settled.done():
                    return
        except ProtocolError as err:
            self.fail(code_run_failed(KIND_PROTOCOL, str(err), self.logs))

    def on_eof(self) -> None:
        if not self.eof_seen and not self.settled.done():
            self.eof_seen = True
            task = self.loop.create_task(self.on_exit())
            self.calls.add(task)  # kept referenced; the run awaits settlement, not this task
            task.add_done_callback(self.calls.discard)

    async def on_exit(self) -> None:
        status = await self.child.wait_exit()
        if self.settled.done():
            return
        if status == -signals.SIGXCPU:
            message = f"CPU budget ({seconds(self.limits.cpu_s)}s) exhausted"
            self.fail(code_run_failed(KIND_CPU, message, self.logs))
        elif status == EXIT_MEMORY:
            self.fail(code_run_failed(KIND_MEMORY, memory_text(self.limits.memory_mb), self.logs))
        else:
            message = f"python exited ({exit_status(status)}) before completing"
            last = last_line(self.stderr_tail)
            self.fail(code_run_failed(KIND_WORKER_EXIT, message + last, self.logs))

    def on_frame(self, frame: dict[str, Any]) -> None:
        handler = _HANDLERS.get(frame["op"])
        if handler is None:
            raise ProtocolError(f'unknown frame op "{frame["op"]}"')
        handler(self, frame)

    def on_started(self, frame: dict[str, Any]) -> None:
        if self.started:
            raise ProtocolError("the program started twice")
        self.started = True
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None
        if self.limits.timeout_s is not None:
            self.deadline = self.loop.call_later(self.limits.timeout_s, self.on_deadline)

    def on_boot_timeout(self) -> None:
        message = f"python did not start the program within {BOOT_TIMEOUT_S}s"
        self.fail(code_run_failed(KIND_WORKER_EXIT, message, self.logs))

    def on_deadline(self) -> None:
        reason = TimeoutReason(ms=float(self.limits.timeout_s or 0) * 1000.0)
        self.fail(ToolTimeoutError(f"code run {reason}"))

    def on_log(self, frame: dict[str, Any]) -> None:
        text = _field(frame, "text", str)
        if self.log_bytes > LOG_BUDGET:
            return
        self.log_bytes += len(text.encode("utf-8", "surrogatepass")) + 1
        self.logs.append(LOG_MARKER if self.log_bytes > LOG_BUDGET + len(LOG_MARKER) else text)

    def on_done(self, frame: dict[str, Any]) -> None:
        has_result = _field(frame, "has_result", bool)
        result: JsonValue = frame.get("result")
        try:
            snapshot_json(result, "result")
        except NotJsonError as err:
            message = f"program completion must be lossless JSON: {err.message}"
            self.fail(code_run_failed(KIND_INVALID_OUTPUT, message, self.logs))
            return
        outcome = CodeRunOutcome(logs=self.logs, result=result, has_result=has_result)
        self.succeed(outcome)

    def on_failed(self, frame: dict[str, Any]) -> None:
        kind = _field(frame, "kind", str)
        if kind not in _CHILD_KINDS:
            raise ProtocolError(f'unknown failure kind "{kind}"')
        self.fail(code_run_failed(kind, _field(frame, "message", str), self.logs))

    # -- binding calls --------------------------------------------------------------------
    def on_call(self, frame: dict[str, Any]) -> None:
        call_id = _field(frame, "id", int)
        name = _field(frame, "name", str)
        args = _field(frame, "args", dict)
        if call_id in self.call_ids:
            raise ProtocolError(f"binding call id {call_id} was used twice")
        self.call_ids.add(call_id)
        binding = self.bindings.get(name)
        if binding is None:
            self.reply(call_id, False, f'unknown tool "{name}"')
            return
        try:
            pending: Any = binding(snapshot_json(args, "arguments"))
        except NotJsonError as err:
            self.reply(call_id, False, f"tool arguments must be lossless JSON: {err.message}")
            return
        except Exception as err:  # a binding that fails before it awaits
            self.reply(call_id, False, failure_message(err))
            return
        task = self.loop.create_task(self.settle_call(call_id, pending))
        self.calls.add(task)
        task.add_done_callback(self.calls.discard)

    async def settle_call(self, call_id: int, pending: Any) -> None:
        try:
            value = snapshot_json(await pending if inspect.isawaitable(pending) else pending)
        except NotJsonError as err:
            self.reply(call_id, False, f"tool result must be lossless JSON: {err.message}")
        except Exception as err:
            self.reply(call_id, False, failure_message(err))
        else:
            self.reply(call_id, True, value)

    def reply(self, call_id: int, ok: bool, payload: Any) -> None:
        if self.settled.done() or self.writer is None or self.writer.is_closing():
            return  # the run is over: the result is discarded
        body = {"op": "reply", "id": call_id, "ok": ok, "value" if ok else "error": payload}
        try:
            frame = encode_frame(body)
        except ValueError:
            message = f"tool result exceeds {MAX_FRAME_BYTES} bytes"
            frame = encode_frame({"op": "reply", "id": call_id, "ok": False, "error": message})
        self.writer.write(frame)


_HANDLERS: Final[dict[str, Callable[[_Run, dict[str, Any]], None]]] = {
    "ready": lambda run, frame: None,
    "started": _Run.on_started,
    "log": _Run.on_log,
    "call": _Run.on_call,
    "done": _Run.on_done,
    "failed": _Run.on_failed,
}


def _field(frame: dict[str, Any], key: str, kind: type) -> Any:
    value = frame.get(key)
    if type(value) is not kind:
        raise ProtocolError(f'frame "{frame["op"]}" has no {kind.__name__} "{key}"')
    return value


def _parameter_names(binding: Binding) -> list[str] | None:
    names = getattr(binding, "parameter_names", None)
    if names is None or isinstance(names, str):
        return None
    return [str(name) for name in names]


def _noop() -> None:
    pass


async def run_on_child(
    child: ChildProcess,
    program: str,
    bindings: Mapping[str, Binding],
    signal: AbortSignal,
    limits: RunLimits,
) -> CodeRunOutcome:
    """Run ``program`` on ``child`` (used once, always discarded) until it settles."""
    run = _Run(child, bindings, limits)
    loop = run.loop

    def on_abort() -> None:
        with contextlib.suppress(RuntimeError):  # the loop may be gone already
            loop.call_soon_threadsafe(lambda: run.fail(abort_error(signal.reason)))

    dispose = signal.add_listener(on_abort)
    try:
        await run.connect(program)
        return await run.settled
    finally:
        dispose()
        run.close()
        await child.discard()
