"""Builders for the Code Mode suites: a scriptable runtime, gated tools, a run_code call.

``FakeRuntime`` stands in for a code runtime the way the seam allows any runtime to: its
``behavior`` gets the bindings and the run signal and plays the program (calls bindings,
awaits them or not, returns an outcome or raises). Tests synchronise on state changes
(``Watch``), never on sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from toolray import (
    AbortController,
    AbortSignal,
    LogStep,
    MemoryEventLog,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray.code import CodeRunOutcome

Behavior = Callable[[Mapping[str, Any], AbortSignal], Awaitable[CodeRunOutcome]]


async def _nothing(bindings: Mapping[str, Any], signal: AbortSignal) -> CodeRunOutcome:
    return CodeRunOutcome(logs=[], result=None, has_result=False)


class FakeRuntime:
    """A code runtime whose program is the test's ``behavior``."""

    def __init__(self, language: str = "python") -> None:
        self.language = language
        self.behavior: Behavior = _nothing
        self.runs: list[tuple[str, Mapping[str, Any], AbortSignal]] = []

    async def run(
        self, program: str, bindings: Mapping[str, Any], signal: AbortSignal
    ) -> CodeRunOutcome:
        self.runs.append((program, bindings, signal))
        return await self.behavior(bindings, signal)


def outcome(*logs: str, **result: Any) -> CodeRunOutcome:
    """``outcome("a", result=1)``: logs, and a result when ``result=`` is given."""
    if "result" in result:
        return CodeRunOutcome(logs=list(logs), result=result["result"], has_result=True)
    return CodeRunOutcome(logs=list(logs), result=None, has_result=False)


class Watch:
    """Wake waiters when watched state changes: ``await watch.until(lambda: ...)``."""

    def __init__(self) -> None:
        self._changed = asyncio.Event()

    def notify(self) -> None:
        self._changed.set()

    async def until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), timeout=10)


def string_output() -> ToolOutput:
    return ToolOutput(schema={"type": "string"}, render=lambda args, value: [text_block(value)])


def register_echo(reg: Any, name: str = "echo", **fields: Any) -> list[Any]:
    """``name(value)`` returns ``"<name>:<value>"``; returns the arguments it received."""
    calls: list[Any] = []

    async def run(args: Any, ctx: Any) -> str:
        calls.append(args)
        return f"{name}:{args['value']}"

    reg.register(
        define_tool(
            name=name,
            description=f"Echo tool {name}.",
            parameters={"value": {"type": "string", "required": True}},
            output=string_output(),
            execute=run,
            **fields,
        )
    )
    return calls


class Gated:
    """A tool whose calls block until released (or until their signal fires)."""

    def __init__(self, reg: Any, name: str, *, safe: bool, watch: Watch) -> None:
        self.name = name
        self.order: list[str] = []
        self.live = self.peak = 0
        self.saw_abort: list[str] = []
        self._gates: list[asyncio.Event] = []
        self._watch = watch

        async def run(args: Any, ctx: Any) -> str:
            ident = args["id"]
            self.order.append(f"start:{ident}")
            self.live += 1
            self.peak = max(self.peak, self.live)
            gate = asyncio.Event()
            self._gates.append(gate)
            ctx.signal.add_listener(gate.set)
            watch.notify()
            await gate.wait()
            if ctx.signal.aborted:
                self.saw_abort.append(ident)
            self.live -= 1
            self.order.append(f"end:{ident}")
            watch.notify()
            return f"{name}:{ident}"

        reg.register(
            define_tool(
                name=name,
                description=f"Gated tool {name}.",
                parameters={"id": {"type": "string", "required": True}},
                output=string_output(),
                execute=run,
                is_concurrency_safe=(lambda args: True) if safe else None,
            )
        )

    def pending(self) -> int:
        return sum(1 for gate in self._gates if not gate.is_set())

    def release(self, index: int = 0) -> None:
        waiting = [gate for gate in self._gates if not gate.is_set()]
        waiting[index].set()

    def release_all(self) -> None:
        for gate in self._gates:
            gate.set()


def code_registry(
    mode: str = "code", *, runtime: FakeRuntime | None = None, **kwargs: Any
) -> tuple[ToolRegistry, FakeRuntime]:
    """A registry in ``mode`` with a fake runtime mounted."""
    fake = runtime if runtime is not None else FakeRuntime()
    return ToolRegistry(mode=mode, code_runtime=fake, **kwargs), fake


def log_step() -> LogStep:
    """A log step over a fresh in-memory log."""
    return LogStep(1, 2, MemoryEventLog())


def events(log: LogStep, kind: str | None = None) -> list[dict[str, Any]]:
    """The events of ``log`` (of one ``type`` when given)."""
    sink = log.sink
    assert isinstance(sink, MemoryEventLog)
    return [e for e in sink.events if kind is None or e["type"] == kind]


async def run_code(
    reg: ToolRegistry,
    code: str = "program",
    *,
    description: str = "Run the test program",
    scope: str | None = "agent",
    signal: AbortSignal | None = None,
    log: LogStep | None = None,
    call_id: str = "call-1",
    root_call_id: str | None = None,
    tool_set: Any = None,
) -> ToolExecutionResult:
    """Execute ``run_code`` through the pipeline, as a model call would be."""
    return await reg.execute(
        ToolExecutionInput(
            call_id,
            "run_code",
            {"code": code, "description": description},
            signal if signal is not None else AbortController().signal,
            scope=scope,
            log=log,
            root_call_id=root_call_id,
            tool_set=tool_set,
        )
    )


async def caught(awaitable: Awaitable[Any]) -> str:
    """The message of what ``awaitable`` raises (``"resolved"`` if it does not)."""
    try:
        await awaitable
    except Exception as err:
        return str(err)
    return "resolved"


def text(result: ToolExecutionResult) -> str:
    """The single text block of a result."""
    assert len(result.content) == 1, result.content
    return str(result.content[0]["text"])
