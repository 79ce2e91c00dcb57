"""The ``run_code`` body: one program run, its bindings, sub-calls and their log records.

Code Mode is programmatic tool calling ("ptc" in ids and log records): the model writes a
program, and the program calls the tools. Each visible tool (the SDK projection, R-SCH-14)
becomes a binding. A binding call that the run accepts gets the next id
``<outer call id>:ptc:<n>`` (a call made after the run is over, or with arguments that are
not lossless JSON, is rejected and numbers nothing, C-CODE-3/11) and is queued on the run's
open lane of the scheduler (:mod:`toolray.scheduler._engine`, the same engine a batch runs
on: stages, cap, ordered commits, C-CODE-6/7), which runs it through the full pipeline of
the outer call's scope as a nested call: ``parent`` = the outer token, the outer root call
id and step admission, and the run-scoped signal.

The run-scoped signal fires when the outer signal does (with its reason) and when the
program settles (``"run_code settled"``). Then queued calls are abandoned, started ones are
awaited and committed, and log work is drained — all before the body returns (C-CODE-12).
The program gets a sub-call's value (or its failure message) when the call commits, in
submission order (C-CODE-5/7); the call's contexts ride the outer result (C-CODE-8).

When the outer call has a log step, each started sub-call writes
``tool/ptc-dispatch-start`` before ``prepare`` and ``tool/ptc-dispatch`` when it commits;
the ``on_dispatch_log`` waterfall may replace the logged content only, and a listener that
raises is contained (C-CODE-9/10).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolray._content import ContentBlock, UserMessage
from toolray._context import ToolRunContext
from toolray._definition import RESERVED_TOOL_NAME
from toolray._eventlog import LogStep
from toolray._execution import ToolExecution
from toolray._json import snapshot_json, thaw_json
from toolray._nested import nested_input
from toolray._normalize import message_of
from toolray._outcomes import ToolExecutionResult
from toolray._signals import AbortController
from toolray._waterfall import run_waterfall
from toolray.errors import NotJsonError
from toolray.pipeline._call import Call
from toolray.pipeline._dispatch import current_notes, current_runner
from toolray.registry._lookup import ToolLookup
from toolray.scheduler._engine import Hooks, Scheduler
from toolray.scheduler._plan import ExecutionMode

from ._run_code import check_run_code_arguments
from ._sdk import parameter_names

__all__ = ("CODE_PLUGIN", "ProgramRuntime", "PtcDispatchLog", "SdkView", "code_run")

_log = logging.getLogger("toolray")

CODE_PLUGIN = "tools-code-mode"
"""The ``source`` of the context deferring a successful sub-result's image content."""

_NO_ARGUMENTS = (
    "tool arguments must be lossless JSON (call the tool with an arguments object, e.g. `{}`)"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PtcDispatchLog:
    """One settled ``run_code`` sub-call about to be logged (the ``on_dispatch_log`` input).

    "Ptc" is programmatic tool calling: Code Mode, where a model's program calls the tools
    (its sub-call ids read ``<outer call id>:ptc:<n>``). ``content`` is the sub-call's
    complete model-facing content; a listener may return a replacement for the
    ``tool/ptc-dispatch`` record only — the program already has the value and the model
    never sees it.
    """

    execution: ToolExecution
    """The outer ``run_code`` execution."""
    scope: str | None
    sub_call_id: str
    name: str
    is_error: bool
    content: list[ContentBlock]


class ProgramRuntime(Protocol):
    """What ``run_code`` needs of a code runtime (``toolray.code.CodeRuntime``)."""

    @property
    def language(self) -> str:
        """The program language."""
        ...

    def run(self, program: str, bindings: Mapping[str, Any], signal: Any) -> Awaitable[Any]:
        """Run ``program`` to an outcome with ``logs``, ``result`` and ``has_result``."""
        ...


class SdkView(ToolLookup, Protocol):
    """A registry as ``run_code`` reads it: the lookup plus the visible definitions."""

    def definitions(self, scope: str | None = None, tool_set: Any = None) -> list[Any]:
        """The visible capability definitions, in view order."""
        ...

    def effective_mode(self, scope: str | None) -> str:
        """The scope's presentation mode."""
        ...


@dataclass(eq=False, slots=True)
class _SubCall:
    """One accepted binding call: its id, log copy and the future of its outcome."""

    sub_call_id: str
    name: str
    logged: Any
    outcome: asyncio.Future[ToolExecutionResult]
    span: dict[str, Any] = field(default_factory=dict)
    """Trace timings (absolute clock seconds) and the body runner's notes."""


class _Rejected(Exception):
    """A binding call the run refuses: the program sees ``ToolCallError(message)``."""


class _Binding:
    """One tool as the program calls it."""

    __slots__ = ("_name", "_run", "parameter_names")

    def __init__(self, run: _Run, name: str, names: Sequence[str] | None) -> None:
        self._run = run
        self._name = name
        self.parameter_names = names

    async def __call__(self, args: Any) -> Any:
        return await self._run.call(self._name, args)


class _Run(Hooks):
    """One program run: the run-scoped signal, its sub-calls' lane and the log work."""

    def __init__(self, view: SdkView, ctx: ToolRunContext, cap: int) -> None:
        execution = ctx.execution
        assert execution is not None
        self.ctx, self.execution, self.cap = ctx, execution, cap
        self.controller = AbortController()
        outer = ctx.signal
        self.signal = self.controller.signal
        self._unhook = outer.add_listener(lambda: self.controller.abort(outer.reason))
        self.log: LogStep | None = execution.log
        self.log_listeners = view.hooks("dispatch_log", execution.scope) if self.log else []
        self.subs: list[_SubCall] = []
        self.log_work: set[asyncio.Task[None]] = set()
        notes = current_notes()  # the run_code call's trace notes: sub-call spans go there
        self.spans: list[dict[str, Any]] | None = None
        if notes is not None:
            self.spans = notes.setdefault("subCalls", [])
        self._now = view.clock.now
        self.lane = Scheduler(view, self.signal, cap, current_runner(), self)

    def over(self, name: str, what: str) -> _Rejected:
        return _Rejected(f"run_code run is over ({self.signal.reason}); {name} {what}")

    # ------------------------------------------------------------------ bindings
    async def call(self, name: str, args: Any) -> Any:
        if self.signal.aborted:
            raise self.over(name, "not dispatched")
        if args is None:
            raise _Rejected(_NO_ARGUMENTS)
        try:
            dispatched = snapshot_json(args, "arguments")
        except NotJsonError as err:
            raise _Rejected(f"tool arguments must be lossless JSON: {err.message}") from None
        except Exception as err:  # a hostile value whose inspection raises
            raise _Rejected(f"tool arguments must be lossless JSON: {message_of(err)}") from None
        sub_call_id = f"{self.execution.call_id}:ptc:{len(self.subs) + 1}"
        inp = nested_input(
            self.execution, name, dispatched, call_id=sub_call_id, signal=self.signal
        )
        outcome: asyncio.Future[ToolExecutionResult] = asyncio.get_running_loop().create_future()
        sub = _SubCall(sub_call_id, name, dispatched, outcome)
        self.lane.submit(inp)  # its index is len(self.subs): no hook runs before the append
        self.subs.append(sub)
        await self.lane.serve(outcome.done)
        result = await outcome
        if self.signal.aborted:
            raise self.over(name, "result discarded")
        if result.is_error:
            raise _Rejected(result.error.message)
        return result.value

    # ------------------------------------------------------------------ the lane's hooks
    def started(self, index: int, mode: ExecutionMode) -> None:
        """The span opens and, with a log step, ``tool/ptc-dispatch-start`` is written."""
        sub = self.subs[index]
        sub.span.update(callId=sub.sub_call_id, name=sub.name, mode=mode, started=self._now())
        if self.spans is not None:
            self.spans.append(sub.span)
        if self.log is not None:
            self.log.sink.append(self._event("tool/ptc-dispatch-start", sub))

    def settled(self, index: int, call: Call) -> None:
        """The span's settle time."""
        self.subs[index].span["settled"] = self._now()

    async def committed(self, index: int, call: Call, result: ToolExecutionResult) -> None:
        """The span closes; the outcome reaches the program, then the log."""
        sub = self.subs[index]
        info = getattr(getattr(result, "error", None), "info", None)
        sub.span.setdefault("settled", sub.span["started"])  # it never reached dispatch
        sub.span.update(call.notes)
        sub.span.update(
            committed=self._now(), isError=result.is_error, code=info.code if info else None
        )
        await self._committed(sub, result)

    def skipped(self, start: int, stop: int) -> None:
        """Queued calls are abandoned once the run is over: they never start."""
        for sub in self.subs[start:stop]:
            if not sub.outcome.done():
                sub.outcome.set_exception(self.over(sub.name, "tool call abandoned"))

    def failed(self, error: BaseException, start: int, stop: int) -> None:
        """A lane failure (a bug, or cancellation): no binding may wait forever."""
        for sub in self.subs[start:stop]:
            if sub.outcome.done():
                continue
            if isinstance(error, asyncio.CancelledError):
                sub.outcome.cancel()
            else:
                sub.outcome.set_exception(error)

    # ------------------------------------------------------------------ commits
    def _event(self, kind: str, sub: _SubCall) -> dict[str, Any]:
        log, execution = self.log, self.execution
        assert log is not None
        return {
            "type": kind,
            "turn": log.turn,
            "step": log.step,
            "rootCallId": execution.root_call_id,
            "parentCallId": execution.call_id,
            "subCallId": sub.sub_call_id,
            "name": sub.name,
            "arguments": thaw_json(sub.logged),
        }

    async def _committed(self, sub: _SubCall, result: ToolExecutionResult) -> None:
        ctx = self.ctx
        if not result.is_error and any(_is_image(block) for block in result.content):
            ctx.defer_context(UserMessage(thaw_json(result.content), source=CODE_PLUGIN))
        for message in result.additional_contexts:
            ctx.defer_context(message)
        if result.concludes_turn:
            ctx.conclude_turn()
        if not sub.outcome.done():
            sub.outcome.set_result(result)
        if self.log is None:
            return
        if not self.log_listeners:
            self._append(sub, result, thaw_json(result.content))
            return
        task = asyncio.ensure_future(self._shape_and_append(sub, result))
        self.log_work.add(task)
        task.add_done_callback(self.log_work.discard)
        while len(self.log_work) > self.cap:  # backpressure: bounded pending log work
            await asyncio.wait(self.log_work, return_when=asyncio.FIRST_COMPLETED)

    async def _shape_and_append(self, sub: _SubCall, result: ToolExecutionResult) -> None:
        original = thaw_json(result.content)
        dispatch = PtcDispatchLog(
            execution=self.execution,
            scope=self.execution.scope,
            sub_call_id=sub.sub_call_id,
            name=sub.name,
            is_error=result.is_error,
            content=thaw_json(result.content),
        )

        async def keep() -> Any:
            return dispatch.content

        try:
            shaped = await run_waterfall(self.log_listeners, (dispatch,), keep)
            if not isinstance(shaped, list):
                raise TypeError(f"expected a list of content blocks, got {type(shaped).__name__}")
            content = thaw_json(snapshot_json(shaped, "content"))
        except Exception as err:
            _log.warning(
                "tools: ptc-dispatch-log listener failed for %s: %s; logging the settled "
                "content unchanged",
                sub.name,
                message_of(err),
            )
            content = original
        self._append(sub, result, content)

    def _append(self, sub: _SubCall, result: ToolExecutionResult, content: Any) -> None:
        assert self.log is not None
        event = self._event("tool/ptc-dispatch", sub)
        event["isError"] = result.is_error
        event["content"] = content
        self.log.sink.append(event)

    async def finish(self) -> None:
        """Settle the run: abort its signal, drain the lane and the log work (C-CODE-12)."""
        self.controller.abort("run_code settled")
        try:
            await self.lane.drain()
            while self.log_work:
                await asyncio.gather(*self.log_work, return_exceptions=True)
        finally:
            self._unhook()


def _is_image(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") == "image"


def code_run(
    view: SdkView,
    runtime_of: Callable[[], ProgramRuntime | None],
    cap: int,
    missing: Callable[[str], Exception],
) -> Callable[[Any, ToolRunContext], Awaitable[dict[str, Any]]]:
    """The ``run_code`` body over ``view``; ``missing(mode)`` is the no-runtime error."""

    async def run_code(args: Any, ctx: ToolRunContext) -> dict[str, Any]:
        check_run_code_arguments(args)
        if not args["description"].strip():
            raise ValueError("invalid description: expected a non-empty string")
        runtime = runtime_of()
        if runtime is None:
            raise missing(view.effective_mode(ctx.scope))
        execution = ctx.execution
        if execution is None:
            raise RuntimeError("run_code runs only inside a toolray pipeline")
        run = _Run(view, ctx, cap)
        bindings = {
            d.name: _Binding(run, d.name, parameter_names(d.parameters))
            for d in view.definitions(ctx.scope, execution.tool_set)
            if d.name != RESERVED_TOOL_NAME
        }
        try:
            outcome = await runtime.run(args["code"], bindings, run.signal)
        finally:
            await run.finish()
        value: dict[str, Any] = {"logs": list(outcome.logs)}
        if outcome.has_result:
            value["result"] = outcome.result
        return value

    return run_code
