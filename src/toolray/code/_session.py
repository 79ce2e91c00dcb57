"""One run on one child: send the program, serve its binding calls, settle exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import signal as signals
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from toolray import AbortSignal, JsonValue, TimeoutReason, snapshot_json
from toolray.errors import NotJsonError, ToolTimeoutError
from toolray.procs import MAX_FRAME_BYTES, ExitStatus, FrameDecoder, ProtocolError, encode_frame

from ._failures import abort_error, echo, failure_message, last_line, memory_text, seconds
from ._process import CodeChild
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

__all__ = ("BOOT_TIMEOUT_S", "EXIT_CPU", "EXIT_MEMORY", "LOG_BUDGET", "RunLimits", "run_on_child")

LOG_BUDGET: Final = 1024 * 1024
"""Bytes of ``logs`` kept per run (the child stops sending at the same budget)."""
LOG_MARKER: Final = f"[toolray.code] log capture truncated at {LOG_BUDGET} bytes"
BOOT_TIMEOUT_S: Final = 30.0
"""How long a child may take to boot and start the program (a warm one has booted)."""
EXIT_MEMORY: Final = 86
"""The child's exit status when it could not even report a ``MemoryError``."""
EXIT_CPU: Final = 87
"""The child's exit status when its CPU budget ran out (``SIGXCPU``)."""
_WRITE_HIGH_WATER: Final = 1 << 20
"""Replies buffered for a child that does not read them: past this, the host stops reading."""
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
    max_outstanding_calls: int = 64
    max_run_bytes: int = 64 * 2**20
    required: tuple[str, ...] = ()
    """Layers a child must report active (``strict``); a child without one is refused."""


class _Pipe(asyncio.Protocol):
    def __init__(
        self,
        on_data: Callable[[bytes], None],
        on_eof: Callable[[], None],
        on_writing: Callable[[bool], None] = lambda paused: None,
    ) -> None:
        self._on_data = on_data
        self._on_eof = on_eof
        self._on_writing = on_writing

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool:
        self._on_eof()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()

    def pause_writing(self) -> None:
        self._on_writing(True)

    def resume_writing(self) -> None:
        self._on_writing(False)


@final
class _Run:
    def __init__(
        self, child: CodeChild, bindings: Mapping[str, Binding], limits: RunLimits
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.child = child
        self.bindings = bindings
        self.limits = limits
        self.settled: asyncio.Future[CodeRunOutcome] = self.loop.create_future()
        self.logs: list[str] = []
        self.log_bytes = 0
        self.read_bytes = 0
        self.call_ids: set[int] = set()
        self.calls: set[asyncio.Task[None]] = set()
        self.running = 0
        self.writing_paused = False
        self.decoder = FrameDecoder()
        self.stderr_tail = bytearray()
        self.channel: asyncio.Transport | None = None
        self.stderr: asyncio.BaseTransport | None = None
        self.deadline: asyncio.TimerHandle | None = None
        self.eof_seen = False
        self.started = False

    async def connect(self, program: str) -> None:
        self.deadline = self.loop.call_later(BOOT_TIMEOUT_S, self.on_boot_timeout)
        if self.child.report is not None:
            self.check_confinement(self.child.report)
        protocol = _Pipe(self.on_data, self.on_eof, self.on_writing)
        self.channel, _ = await self.loop.create_unix_connection(
            lambda: protocol, sock=self.child.channel
        )
        self.channel.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        stderr, self.child.child.stderr = self.child.child.stderr, None  # the transport owns it
        if stderr is not None:
            pipe = os.fdopen(stderr, "rb", buffering=0)
            err, _ = await self.loop.connect_read_pipe(lambda: _Pipe(self.on_stderr, _noop), pipe)
            self.stderr = err
        names = [[name, _parameter_names(b)] for name, b in self.bindings.items()]
        try:
            self.channel.write(encode_frame({"op": "run", "program": program, "bindings": names}))
        except ValueError as err:
            self.fail(code_run_failed(KIND_OUTPUT_LIMIT, f"the program does not fit: {err}"))

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
        if self.channel is not None:
            self.channel.abort()  # nothing more is owed to a settled child
        if self.stderr is not None:
            self.stderr.close()

    # -- bounds: the host never lets a child make it hold unbounded work or bytes ----------
    def count(self, data: bytes) -> bool:
        self.read_bytes += len(data)
        if self.read_bytes <= self.limits.max_run_bytes:
            return True
        message = f"the program sent more than {self.limits.max_run_bytes} bytes"
        self.fail(code_run_failed(KIND_PROTOCOL, message, self.logs))
        return False

    def on_writing(self, paused: bool) -> None:
        self.writing_paused = paused
        self.flow()

    def flow(self) -> None:
        """Read the child only while its calls and unread replies are within bounds."""
        channel = self.channel
        if channel is None or channel.is_closing():
            return
        if self.writing_paused or self.running >= self.limits.max_outstanding_calls:
            channel.pause_reading()
        else:
            channel.resume_reading()

    # -- the child's output ---------------------------------------------------------------
    def on_stderr(self, data: bytes) -> None:
        if self.settled.done() or not self.count(data):
            return
        self.stderr_tail += data
        del self.stderr_tail[:-_STDERR_TAIL]

    def on_data(self, data: bytes) -> None:
        if self.settled.done() or not self.count(data):
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
        if self.cpu_exhausted(status):
            message = f"CPU budget ({seconds(self.limits.cpu_s)}s) exhausted"
            self.fail(code_run_failed(KIND_CPU, message, self.logs))
        elif status.code == EXIT_MEMORY:
            self.fail(code_run_failed(KIND_MEMORY, memory_text(self.limits.memory_mb), self.logs))
        else:
            message = f"python exited ({status.describe()}) before completing"
            last = last_line(self.stderr_tail)
            self.fail(code_run_failed(KIND_WORKER_EXIT, message + last, self.logs))

    def cpu_exhausted(self, status: ExitStatus) -> bool:
        """Its own handler saw ``SIGXCPU``, or the hard limit's ``SIGKILL`` ended it."""
        if status.code == EXIT_CPU or status.signal == signals.SIGXCPU:
            return True
        cpu_s = self.limits.cpu_s
        return status.signal == signals.SIGKILL and cpu_s is not None and status.cpu_s >= cpu_s

    def check_confinement(self, report: Mapping[str, Any]) -> None:
        """``strict``: refuse a child that reports a required layer missing."""
        missing = dict(report.get("missing") or {})
        lacking = [
            f"{layer}: {echo(str(missing[layer]))}"
            for layer in self.limits.required
            if layer in missing
        ]
        if lacking:
            message = "the sandbox is incomplete: " + "; ".join(lacking)
            self.fail(code_run_failed(KIND_WORKER_EXIT, message, self.logs))

    def on_frame(self, frame: dict[str, Any]) -> None:
        handler = _HANDLERS.get(frame["op"])
        if handler is None:
            raise ProtocolError(f'unknown frame op "{echo(frame["op"])}"')
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
            raise ProtocolError(f'unknown failure kind "{echo(kind)}"')
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
            self.reply(call_id, False, f'unknown tool "{echo(name)}"')
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
        self.running += 1
        self.flow()

    async def settle_call(self, call_id: int, pending: Any) -> None:
        try:
            await self.settle_value(call_id, pending)
        finally:
            self.running -= 1
            self.flow()

    async def settle_value(self, call_id: int, pending: Any) -> None:
        try:
            value = snapshot_json(await pending if inspect.isawaitable(pending) else pending)
        except NotJsonError as err:
            self.reply(call_id, False, f"tool result must be lossless JSON: {err.message}")
        except Exception as err:
            self.reply(call_id, False, failure_message(err))
        else:
            self.reply(call_id, True, value)

    def reply(self, call_id: int, ok: bool, payload: Any) -> None:
        if self.settled.done() or self.channel is None or self.channel.is_closing():
            return  # the run is over: the result is discarded
        body = {"op": "reply", "id": call_id, "ok": ok, "value" if ok else "error": payload}
        try:
            frame = encode_frame(body)
        except ValueError:
            message = f"tool result exceeds {MAX_FRAME_BYTES} bytes"
            frame = encode_frame({"op": "reply", "id": call_id, "ok": False, "error": message})
        self.channel.write(frame)

    def on_ready(self, frame: dict[str, Any]) -> None:
        report = frame.get("confinement")
        self.child.report = dict(report) if isinstance(report, dict) else {}
        self.check_confinement(self.child.report)


_HANDLERS: Final[dict[str, Callable[[_Run, dict[str, Any]], None]]] = {
    "ready": _Run.on_ready,
    "started": _Run.on_started,
    "log": _Run.on_log,
    "call": _Run.on_call,
    "done": _Run.on_done,
    "failed": _Run.on_failed,
}


def _field(frame: dict[str, Any], key: str, kind: type) -> Any:
    value = frame.get(key)
    if type(value) is not kind:
        raise ProtocolError(f'frame "{echo(frame["op"])}" has no {kind.__name__} "{key}"')
    return value


def _parameter_names(binding: Binding) -> list[str] | None:
    names = getattr(binding, "parameter_names", None)
    if names is None or isinstance(names, str):
        return None
    return [str(name) for name in names]


def _noop() -> None:
    pass


async def run_on_child(
    child: CodeChild,
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
