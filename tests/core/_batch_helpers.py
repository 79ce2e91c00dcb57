"""Shared rig for the batch-executor suites: one ordered trace, gates, no sleeps.

Every observable step lands in one :class:`Trace` (a list of ``"<what>:<id>"`` labels, each
with a gate that opens when the label is first added), so ordering claims are assertions on
one list:

- ``tool/call:<id>`` / ``tool/result:<id>``: durable appends (:class:`TraceLog`);
- ``pre:<id>``, ``dispatch:<id>``, ``settle:<id>``, ``post:<id>``, ``observe:<id>``: the
  pipeline hooks installed by :func:`trace_hooks` (``settle`` = the around-dispatch ``next()``
  returned);
- ``body:<key>`` / ``end:<key>``: the tool body (:func:`keyed_tool`) entering and leaving.

Keys starting with ``w`` are exclusive ("writes"); every other key is parallel-safe.
Waiting is always on a gate, bounded by :data:`WAIT_S` so a scheduling bug fails fast.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from toolray import (
    AbortController,
    LogStep,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolDefinition,
    ToolExecutionResult,
    ToolRegistry,
    ToolRunContext,
    UserMessage,
    text_block,
)
from toolray.testing import Gate, RecordingTool

WAIT_S = 5.0
"""Upper bound for a wait-for-condition (never a pacing delay)."""

Action = Callable[[ToolRunContext], Awaitable[None] | None]


async def reached(gate: Gate, what: str = "") -> None:
    """Wait until ``gate`` opens; fail (instead of hanging) if it never does."""
    try:
        await asyncio.wait_for(gate.wait(), WAIT_S)
    except TimeoutError:
        raise AssertionError(f"never reached: {what}") from None


class Trace:
    """One ordered record of everything observable in a batch run."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._gates: dict[str, Gate] = {}

    def add(self, item: str) -> None:
        self.items.append(item)
        self.gate(item).open()

    def gate(self, item: str) -> Gate:
        return self._gates.setdefault(item, Gate())

    async def reached(self, item: str) -> None:
        await reached(self.gate(item), item)

    def index(self, item: str) -> int:
        return self.items.index(item)

    def of(self, kind: str) -> list[str]:
        """The ids of every ``kind:<id>`` label, in order."""
        prefix = kind + ":"
        return [i[len(prefix) :] for i in self.items if i.startswith(prefix)]

    def only(self, *kinds: str) -> list[str]:
        """The labels of the given kinds, in order."""
        return [i for i in self.items if i.split(":", 1)[0] in kinds]

    def before(self, first: str, second: str) -> bool:
        return self.index(first) < self.index(second)


class LogFailure(Exception):
    """Raised by :class:`TraceLog` to simulate a broken durable sink."""


class TraceLog:
    """An ``EventLog`` that keeps its events and traces every append."""

    def __init__(self, trace: Trace, fail_on: str | None = None) -> None:
        self.events: list[dict[str, Any]] = []
        self.trace = trace
        self.fail_on = fail_on
        self.failed = False

    def append(self, event: dict[str, Any]) -> None:
        label = f"{event['type']}:{event['callId']}"
        if label == self.fail_on:
            self.failed = True
            self.trace.add("sink-failed")
            raise LogFailure(f"sink refused {label}")
        self.events.append(event)
        self.trace.add(label)

    def labels(self) -> list[str]:
        return [f"{e['type']}:{e['callId']}" for e in self.events]


def ctx_msg(text: str) -> UserMessage:
    return UserMessage([text_block(text)], source="test")


def texts(messages: Iterable[UserMessage]) -> list[str]:
    return [m.content[0]["text"] for m in messages]


def is_safe_key(key: str) -> bool:
    return not str(key).startswith("w")


def keyed_tool(
    rec: RecordingTool,
    trace: Trace | None = None,
    *,
    before: Mapping[str, Action] | None = None,
    safe: Callable[[str], bool] = is_safe_key,
    **overrides: Any,
) -> ToolDefinition:
    """``rec``'s definition, classified per key, with per-key ``before`` actions.

    The action for a key runs inside the body before the recording starts (it may defer
    contexts, conclude, abort, or await something).
    """
    base = rec.definition()
    actions = before if before is not None else {}  # by reference: tests may add later

    def mark(what: str, key: str) -> None:
        if trace is not None:
            trace.add(f"{what}:{key}")

    if rec.sync:

        def run_sync(args: Any, ctx: ToolRunContext) -> Any:
            key = args["key"]
            mark("body", key)
            try:
                action = actions.get(key)
                if action is not None:
                    action(ctx)
                return base.execute(args, ctx)
            finally:
                mark("end", key)

        execute: Any = run_sync
    else:

        async def run_async(args: Any, ctx: ToolRunContext) -> Any:
            key = args["key"]
            mark("body", key)
            try:
                action = actions.get(key)
                if action is not None:
                    outcome = action(ctx)
                    if inspect.isawaitable(outcome):
                        await outcome
                return await base.execute(args, ctx)  # type: ignore[misc]
            finally:
                mark("end", key)

        execute = run_async
    options: dict[str, Any] = {
        "execute": execute,
        "is_concurrency_safe": lambda args: safe(args["key"]),
    }
    options.update(overrides)
    return rec.definition(**options)


def trace_hooks(context: Any, trace: Trace) -> None:
    """Record pre-execute, dispatch/settle, post-execute and result observation."""

    async def pre(execution: Any, nxt: Any) -> Any:
        trace.add(f"pre:{execution.call_id}")
        return await nxt()

    async def around(execution: Any, nxt: Any) -> Any:
        trace.add(f"dispatch:{execution.call_id}")
        result = await nxt()
        trace.add(f"settle:{execution.call_id}")
        return result

    async def post(execution: Any, result: Any, nxt: Any) -> Any:
        trace.add(f"post:{execution.call_id}")
        return await nxt()

    def observe(execution: Any, result: Any) -> None:
        trace.add(f"observe:{execution.call_id}")

    context.on_pre_execute(pre)
    context.on_execute(around)
    context.on_post_execute(post)
    context.on_result(observe)


def call(key: str, name: str = "rec") -> ToolCall:
    return ToolCall(f"c{key}", name, json.dumps({"key": key}))


def calls(*keys: str, name: str = "rec") -> list[ToolCall]:
    return [call(k, name) for k in keys]


def code_of(result: ToolExecutionResult) -> str:
    """``"ok"``, the error code, or ``"error"`` for a failure without info."""
    if not result.is_error:
        return "ok"
    info = result.error.info  # type: ignore[union-attr]
    return info.code if info is not None else "error"


def codes(batch: ToolBatchResult) -> list[tuple[str, str]]:
    return [(r.call_id, code_of(r.result)) for r in batch.results]


def text_of(result: ToolExecutionResult) -> str:
    return str(result.content[0]["text"])


ABORTED_BEFORE_DISPATCH_WIRE = {
    "isError": True,
    "content": [{"type": "text", "text": "Error: tool call aborted before dispatch"}],
    "error": {
        "message": "tool call aborted before dispatch",
        "info": {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"},
    },
}


@dataclass
class Rig:
    """A registry with a traced recording tool, a traced log and the step's controller."""

    gated: Iterable[str] = ()
    sync: bool = False
    before: Mapping[str, Action] = field(default_factory=dict)
    mode: str = "native"
    scope: str = "agent"
    fail: Iterable[str] = ()
    hooks: bool = True
    reg: ToolRegistry = field(init=False)
    rec: RecordingTool = field(init=False)
    trace: Trace = field(init=False)
    log: TraceLog = field(init=False)
    ctl: AbortController = field(init=False)
    tasks: list[asyncio.Task[Any]] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.reg = ToolRegistry(mode=self.mode)  # type: ignore[arg-type]
        self.rec = RecordingTool(name="rec", sync=self.sync, fail=set(self.fail))
        for key in self.gated:
            self.rec.gates[key] = Gate()
        self.trace = Trace()
        self.log = TraceLog(self.trace)
        self.ctl = AbortController()
        self.tool = self.reg.register(keyed_tool(self.rec, self.trace, before=self.before))
        if self.hooks:
            trace_hooks(self.reg, self.trace)

    def batch(self, *keys: str, cap: int | None = None, logged: bool = True) -> ToolBatchInput:
        return ToolBatchInput(
            calls(*keys),
            self.ctl.signal,
            max_parallel_tool_calls=cap,
            scope=self.scope,
            log=LogStep(1, 1, self.log) if logged else None,
        )

    def start(self, *keys: str, cap: int | None = None) -> asyncio.Task[ToolBatchResult]:
        """Run a batch of ``keys`` in the background; ``"returned"`` is traced when it settles."""

        async def run() -> ToolBatchResult:
            try:
                return await self.reg.execute_batch(self.batch(*keys, cap=cap))
            finally:
                self.trace.add("returned")

        task = asyncio.ensure_future(run())
        self.tasks.append(task)
        return task

    async def run(self, *keys: str, cap: int | None = None) -> ToolBatchResult:
        return await self.start(*keys, cap=cap)

    def open(self, *keys: str) -> None:
        for key in keys:
            self.rec.gates[key].open()

    async def started(self, *keys: str) -> None:
        for key in keys:
            await reached(self.rec.started_gate(key), f"body {key} started")

    async def __aenter__(self) -> Rig:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Never leave a body blocked (a blocked thread would hang interpreter exit)."""
        for gate in self.rec.gates.values():
            gate.open()
        if self.tasks:
            await asyncio.wait(self.tasks, timeout=WAIT_S)
            for task in self.tasks:
                if task.done() and not task.cancelled():
                    task.exception()
