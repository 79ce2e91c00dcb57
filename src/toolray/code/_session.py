"""One run on one child: send the program, serve its binding calls, settle exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Final, final

from toolray import AbortSignal, JsonValue, TimeoutReason, snapshot_json
from toolray.errors import NotJsonError, ToolTimeoutError
from toolray.procs import MAX_FRAME_BYTES, ExitStatus, FrameDecoder, ProtocolError, encode_frame

from ._channel import (
    EXIT_CPU,
    EXIT_MEMORY,
    ChannelProtocol,
    ChildProtocol,
    RunLimits,
    ended,
    field,
    noop,
    parameter_names,
)
from ._failures import abort_error, clean, cleaned, echo, failure_message
from ._process import CodeChild
from ._types import (
    KIND_INVALID_OUTPUT,
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
_WRITE_HIGH_WATER: Final = 1 << 20
"""Replies buffered for a child that does not read them: past this, the host stops reading."""
_CHILD_KINDS: Final = frozenset(
    {"syntax", "exception", "import", "invalid-output", "output-limit", "memory"}
)
_STDERR_TAIL: Final = 4096


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
        self.calls: dict[int, asyncio.Task[None]] = {}
        """Binding calls in flight, kept referenced (each removes itself: no done callback,
        so no loop turn after a reply)."""
        self.watch: asyncio.Task[None] | None = None
        self.running = 0
        self.writing_paused = False
        self.paused = False
        """Whether the host stopped reading the child (too many calls or unread replies)."""
        self.draining = False
        self.backlog: deque[dict[str, Any]] = deque()
        self.exit_status: ExitStatus | None = None
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
        protocol = ChannelProtocol(self.on_data, self.on_eof, self.on_writing)
        self.channel, _ = await self.loop.create_unix_connection(
            lambda: protocol, sock=self.child.channel
        )
        self.channel.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        stderr, self.child.child.stderr = self.child.child.stderr, None  # the transport owns it
        if stderr is not None:
            pipe = os.fdopen(stderr, "rb", buffering=0)
            err, _ = await self.loop.connect_read_pipe(
                lambda: ChildProtocol(self.on_stderr, noop), pipe
            )
            self.stderr = err
        names = [[name, parameter_names(b)] for name, b in self.bindings.items()]
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
    def count(self, data: bytes | memoryview) -> bool:
        self.read_bytes += len(data)
        if self.read_bytes <= self.limits.max_run_bytes:
            return True
        message = f"the program sent more than {self.limits.max_run_bytes} bytes"
        self.fail(code_run_failed(KIND_PROTOCOL, message, self.logs))
        return False

    def on_writing(self, paused: bool) -> None:
        self.writing_paused = paused
        self.flow()

    def blocked(self) -> bool:
        """Too many calls in flight, or too many replies unread: take no more frames."""
        if self.exit_status is not None:  # a dead child's last frames are a bounded few
            return False
        return self.writing_paused or self.running >= self.limits.max_outstanding_calls

    def flow(self) -> None:
        """Take the child's frames, and read it, only while within bounds."""
        channel = self.channel
        if channel is None or channel.is_closing() or self.draining:
            return
        self.drain()
        blocked = self.blocked()
        if blocked != self.paused and not channel.is_closing():
            self.paused = blocked
            if blocked:
                channel.pause_reading()
            else:
                channel.resume_reading()

    def drain(self) -> None:
        self.draining = True
        try:
            while self.backlog and not self.blocked() and not self.settled.done():
                self.on_frame(self.backlog.popleft())
        except ProtocolError as err:
            self.fail(code_run_failed(KIND_PROTOCOL, str(err), self.logs))
        finally:
            self.draining = False
        if not self.backlog and self.exit_status is not None:
            self.on_exited(self.exit_status)

    # -- the child's output ---------------------------------------------------------------
    def on_stderr(self, data: bytes) -> None:
        if self.settled.done() or not self.count(data):
            return
        self.stderr_tail += data
        del self.stderr_tail[:-_STDERR_TAIL]

    def on_data(self, data: memoryview) -> None:
        if self.settled.done() or not self.count(data):
            return
        try:
            self.backlog.extend(self.decoder.feed(data))
        except ProtocolError as err:
            self.fail(code_run_failed(KIND_PROTOCOL, str(err), self.logs))
            return
        self.flow()

    def on_eof(self) -> None:
        if not self.eof_seen and not self.settled.done():
            self.eof_seen = True
            # kept referenced; the run awaits settlement, not this task
            self.watch = self.loop.create_task(self.on_exit())

    def on_exited(self, status: ExitStatus) -> None:
        if not self.settled.done():
            self.fail(ended(status, self.limits, self.stderr_tail, self.logs))

    async def on_exit(self) -> None:
        self.exit_status = await self.child.wait_exit()
        self.drain()  # the frames it sent before it died come first

    def check_confinement(self, report: Mapping[str, Any]) -> None:
        """``strict``: refuse a child that reports a required layer missing."""
        missing = report.get("missing")
        if not isinstance(missing, dict):
            missing = {}
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
        text = field(frame, "text", str)
        if self.log_bytes > LOG_BUDGET:
            return
        self.log_bytes += len(text.encode("utf-8", "surrogatepass")) + 1
        over = self.log_bytes > LOG_BUDGET + len(LOG_MARKER)
        self.logs.append(LOG_MARKER if over else clean(text))

    def on_done(self, frame: dict[str, Any]) -> None:
        has_result = field(frame, "has_result", bool)
        result: JsonValue = frame.get("result")
        try:
            snapshot_json(result, "result")
        except NotJsonError as err:
            message = f"program completion must be lossless JSON: {err.message}"
            self.fail(code_run_failed(KIND_INVALID_OUTPUT, message, self.logs))
            return
        outcome = CodeRunOutcome(logs=self.logs, result=cleaned(result), has_result=has_result)
        self.succeed(outcome)

    def on_failed(self, frame: dict[str, Any]) -> None:
        kind = field(frame, "kind", str)
        if kind not in _CHILD_KINDS:
            raise ProtocolError(f'unknown failure kind "{echo(kind)}"')
        message = echo(clean(field(frame, "message", str)))  # what the child says, cut
        self.fail(code_run_failed(kind, message, self.logs))

    # -- binding calls --------------------------------------------------------------------
    def on_call(self, frame: dict[str, Any]) -> None:
        call_id = field(frame, "id", int)
        name = field(frame, "name", str)
        args = field(frame, "args", dict)
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
        self.calls[call_id] = self.loop.create_task(self.settle_call(call_id, pending))
        self.running += 1

    async def settle_call(self, call_id: int, pending: Any) -> None:
        try:
            value = snapshot_json(await pending if inspect.isawaitable(pending) else pending)
        except NotJsonError as err:
            self.reply(call_id, False, f"tool result must be lossless JSON: {err.message}")
        except Exception as err:
            self.reply(call_id, False, failure_message(err))
        else:
            self.reply(call_id, True, value)
        finally:
            del self.calls[call_id]
            self.running -= 1
            if self.paused or self.backlog:  # else nothing waits for this call's slot
                self.flow()

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
        if self.started or self.child.report is not None:
            raise ProtocolError("the child reported ready twice")
        self.child.report = field(frame, "confinement", dict)
        self.check_confinement(self.child.report)


_HANDLERS: Final[dict[str, Callable[[_Run, dict[str, Any]], None]]] = {
    "ready": _Run.on_ready,
    "started": _Run.on_started,
    "log": _Run.on_log,
    "call": _Run.on_call,
    "done": _Run.on_done,
    "failed": _Run.on_failed,
}


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
