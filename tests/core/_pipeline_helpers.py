"""Shared helpers for the per-call pipeline behaviour suite (P-*).

``Probe`` installs a recording listener on every stage (pre-execute, guard, around,
post-execute, result observer) as the *outermost* listener of its kind, and builds tools
whose body and ``finalize_content`` are counted too, so a test can assert exactly which
stages ran for one ``execute()``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from toolray import (
    AbortController,
    AbortSignal,
    Ask,
    Deny,
    TimeoutPolicy,
    ToolDefinition,
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolExecutionSuccess,
    ToolFailure,
    ToolOutput,
    ToolRegistry,
    UserMessage,
    define_tool,
    text_block,
)
from toolray.testing import FakeClock

STAGES = ("pre", "guard", "around", "body", "post", "finalize", "result")
ABORTED_BEFORE = "tool call aborted before dispatch"
ABORTED_MSG = "tool call aborted"
ARGS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"
NOT_LOSSLESS = "tool result must be losslessly JSON-serializable"
ABD_INFO = ("AbortError", "ABORTED_BEFORE_DISPATCH")
ABORTED_INFO = ("AbortError", "ABORTED")


async def yield_turns(turns: int = 10) -> None:
    """Give every ready task a few loop turns (no time passes): lets a wrong early return
    happen before a test asserts that a call is still pending."""
    for _ in range(turns):
        await asyncio.sleep(0)


def text_output(**kw: Any) -> ToolOutput:
    """A string-valued output contract rendering the value as one text block."""
    return ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)], **kw)


async def echo_body(args: Any, ctx: Any) -> Any:
    """The default body: echo ``args["text"]`` (or ``""``)."""
    return args.get("text", "")


def make_tool(
    name: str = "echo",
    execute: Callable[..., Any] | None = None,
    *,
    parameters: dict[str, Any] | None = None,
    output: ToolOutput | None = None,
    **kw: Any,
) -> ToolDefinition:
    """A ``define_tool`` tool: optional ``text`` string argument, string output."""
    return define_tool(
        name=name,
        description=f"{name} tool",
        parameters=parameters if parameters is not None else {"text": {"type": "string"}},
        output=output if output is not None else text_output(),
        execute=execute if execute is not None else echo_body,
        **kw,
    )


def raw_tool(name: str = "raw", execute: Callable[..., Any] | None = None, **kw: Any) -> Any:
    """A raw ``ToolDefinition`` (no argument validation), string output."""

    async def body(args: Any, ctx: Any) -> str:
        return "ok"

    return ToolDefinition(
        name=name,
        description=f"{name} tool",
        parameters=kw.pop("parameters", {"type": "object"}),
        output=kw.pop("output", text_output()),
        execute=execute if execute is not None else body,
        **kw,
    )


def counted(definition: ToolDefinition, counter: Counter[str], key: str = "body") -> Any:
    """``definition`` whose (already wrapped) ``execute`` counts each invocation."""
    inner = definition.execute
    if inspect.iscoroutinefunction(inner):

        async def body(args: Any, ctx: Any) -> Any:
            counter[key] += 1
            return await inner(args, ctx)  # type: ignore[misc]

    else:

        def body(args: Any, ctx: Any) -> Any:  # type: ignore[misc]
            counter[key] += 1
            return inner(args, ctx)

    return dataclasses.replace(definition, execute=body)


_EMPTY: Any = object()


def call(
    name: str = "echo",
    arguments: Any = _EMPTY,
    *,
    signal: AbortSignal | None = None,
    call_id: str = "c1",
    **kw: Any,
) -> ToolExecutionInput:
    """A ``ToolExecutionInput`` with ``{}`` arguments (``None`` is passed on) and a fresh signal."""
    return ToolExecutionInput(
        call_id,
        name,
        {} if arguments is _EMPTY else arguments,
        signal if signal is not None else AbortController().signal,
        **kw,
    )


def aborted_signal(reason: Any = "user") -> AbortSignal:
    """An already-aborted signal."""
    ctrl = AbortController()
    ctrl.abort(reason)
    return ctrl.signal


def msg(text: str, source: str = "test") -> UserMessage:
    """A one-text-block user message (an additional context)."""
    return UserMessage([text_block(text)], source=source)


def texts(contexts: Any) -> list[str]:
    """The first text of each additional context."""
    return [c.content[0]["text"] for c in contexts]


def error_wire(message: str, info: tuple[str, str] | None = None) -> dict[str, Any]:
    """The exact ``to_wire()`` of a registry-produced failure."""
    error: dict[str, Any] = {"message": message}
    if info is not None:
        error["info"] = {"name": info[0], "code": info[1]}
    return {"isError": True, "content": [text_block(f"Error: {message}")], "error": error}


def assert_failure(
    result: ToolExecutionResult, message: str, info: tuple[str, str] | None = None
) -> None:
    """Exactly one ``Error: <message>`` block and ``error == (message, info)``."""
    assert isinstance(result, ToolExecutionFailure), result
    expected_info = ToolErrorInfo(*info) if info is not None else None
    assert result.error == ToolFailure(message, expected_info)
    assert result.content == [text_block(f"Error: {message}")]


def code_of(result: ToolExecutionResult) -> str | None:
    """``error.info.code`` of a failure, else ``None``."""
    if isinstance(result, ToolExecutionFailure) and result.error.info is not None:
        return result.error.info.code
    return None


class Probe:
    """Recording listeners on every stage (outermost of their kind) plus counted tools."""

    def __init__(self, registry: ToolRegistry, context: Any = None) -> None:
        self.registry = registry
        self.counts: Counter[str] = Counter()
        self.seen: defaultdict[str, list[Any]] = defaultdict(list)
        self.results: list[ToolExecutionResult] = []
        self.post_results: list[ToolExecutionResult] = []
        where = context if context is not None else registry
        where.on_pre_execute(self._pre)
        where.guard(self._guard)
        where.on_execute(self._around)
        where.on_post_execute(self._post)
        where.on_result(self._observe)

    async def _pre(self, execution: Any, next_: Any) -> Any:
        self.counts["pre"] += 1
        self.seen["pre"].append(execution)
        return await next_()

    def _guard(self, execution: Any) -> None:
        self.counts["guard"] += 1
        self.seen["guard"].append(execution)

    async def _around(self, execution: Any, next_: Any) -> Any:
        self.counts["around"] += 1
        self.seen["around"].append(execution)
        return await next_()

    async def _post(self, execution: Any, result: Any, next_: Any) -> Any:
        self.counts["post"] += 1
        self.seen["post"].append(execution)
        self.post_results.append(result)
        return await next_()

    def _observe(self, execution: Any, result: Any) -> None:
        self.counts["result"] += 1
        self.seen["result"].append(execution)
        self.results.append(result)

    def finalize(self, execution: Any, result: Any) -> None:
        """A counting ``finalize_content`` that keeps the content."""
        self.counts["finalize"] += 1
        self.seen["finalize"].append((execution, result))

    def tool(self, name: str = "echo", execute: Callable[..., Any] | None = None, **kw: Any) -> Any:
        """A counted ``define_tool`` tool with the counting finalizer."""
        kw.setdefault("finalize_content", self.finalize)
        return counted(make_tool(name, execute, **kw), self.counts)

    def register(
        self, name: str = "echo", execute: Callable[..., Any] | None = None, **kw: Any
    ) -> Any:
        """Register :meth:`tool` globally; return the disposer."""
        return self.registry.register(self.tool(name, execute, **kw))

    def stages(self) -> dict[str, int]:
        """The count of every stage."""
        return {stage: self.counts[stage] for stage in STAGES}


def replacing(signal_of: Callable[[], AbortSignal]) -> Any:
    """An around wrapper that replaces the signal for ``next()`` and restores it after."""

    async def wrapper(execution: Any, next_: Any) -> Any:
        previous = execution.signal
        execution.signal = signal_of()
        try:
            return await next_()
        finally:
            execution.signal = previous

    return wrapper


def stage_counts(**ran: int) -> dict[str, int]:
    """Expected stage counts: every stage 0 unless given."""
    return {stage: ran.get(stage, 0) for stage in STAGES}


ALL_STAGES = stage_counts(pre=1, guard=1, around=1, body=1, post=1, finalize=1, result=1)


# ---------------------------------------------------------------------------- scenarios
# One scenario per outcome origin of the stage matrix. Each registers the probe's tool
# ("echo") and whatever hooks it needs on ``reg``, runs one call and returns its result.
# The probe's own listeners are registered first, so they are the outermost.


async def _raise_async(*args: Any) -> Any:
    raise RuntimeError("listener broke")


def _raise_sync(*args: Any) -> Any:
    raise RuntimeError("guard broke")


class _ThrowingApproval:
    async def request(self, request: Any) -> Any:
        raise RuntimeError("approval broke")


async def sc_args_fail(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    return await reg.execute(call(arguments={"bad": {1}}))


async def sc_collapse(reg: ToolRegistry, probe: Probe, *, aborted: bool = False) -> Any:
    probe.register()
    reg.scope("agent").present_as("code")
    signal = aborted_signal() if aborted else None
    return await reg.execute(call(scope="agent", signal=signal))


async def sc_collapse_aborted(reg: ToolRegistry, probe: Probe) -> Any:
    return await sc_collapse(reg, probe, aborted=True)


async def sc_pre_aborted(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    return await reg.execute(call(signal=aborted_signal()))


async def sc_pre_throws(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    reg.on_pre_execute(_raise_async)
    return await reg.execute(call())


async def sc_approval_throws(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    reg.set_approval(_ThrowingApproval())  # type: ignore[attr-defined]

    async def ask(execution: Any, next_: Any) -> Any:
        return Ask("why")

    reg.on_pre_execute(ask)
    return await reg.execute(call(scope="agent"))


async def sc_guard_throws(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    reg.guard(_raise_sync)
    return await reg.execute(call())


async def sc_pre_deny(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()

    async def deny(execution: Any, next_: Any) -> Any:
        return Deny("denied")

    reg.on_pre_execute(deny)
    return await reg.execute(call())


async def sc_ask_deny(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()

    async def ask(execution: Any, next_: Any) -> Any:
        return Ask("needs approval")  # no approval service: degrades to deny

    reg.on_pre_execute(ask)
    return await reg.execute(call(scope="agent"))


async def sc_guard_deny(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    reg.guard(lambda execution: "guard denial")
    return await reg.execute(call())


async def sc_aborted_in_gates(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    ctrl = AbortController()

    async def abort(execution: Any, next_: Any) -> Any:
        ctrl.abort("user")
        return await next_()

    reg.on_pre_execute(abort)
    return await reg.execute(call(signal=ctrl.signal))


async def sc_around_throws(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    reg.on_execute(_raise_async)
    return await reg.execute(call())


async def sc_wrapper_bad_value(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()

    async def short(execution: Any, next_: Any) -> Any:
        return ToolExecutionSuccess(42, [text_block("42")])

    reg.on_execute(short)
    return await reg.execute(call())


async def sc_wrapper_tool_gone(reg: ToolRegistry, probe: Probe) -> Any:
    dispose = probe.register()

    async def vanish(execution: Any, next_: Any) -> Any:
        result = await next_()
        dispose()
        return dataclasses.replace(result, content=[text_block("copy")])

    reg.on_execute(vanish)
    return await reg.execute(call())


async def sc_fused_aborted(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()

    async def aborted(execution: Any, next_: Any) -> Any:
        execution.signal = aborted_signal("deadline")
        return await next_()

    reg.on_execute(aborted)
    return await reg.execute(call())


async def sc_unknown(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    return await reg.execute(call("nope"))


async def sc_body_throws(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register("echo", _raise_async)
    return await reg.execute(call())


async def sc_invalid_args(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register(parameters={"path": {"type": "string", "required": True}})
    return await reg.execute(call())


async def sc_invalid_output(reg: ToolRegistry, probe: Probe) -> Any:
    async def body(args: Any, ctx: Any) -> Any:
        return 42

    probe.register("echo", body)
    return await reg.execute(call())


async def sc_success(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    return await reg.execute(call(arguments={"text": "ok"}))


async def sc_post_throws(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    reg.on_post_execute(_raise_async)
    return await reg.execute(call())


async def sc_aborted_after_body(reg: ToolRegistry, probe: Probe) -> Any:
    probe.register()
    ctrl = AbortController()

    async def abort_after(execution: Any, next_: Any) -> Any:
        result = await next_()
        ctrl.abort("user")
        return result

    reg.on_execute(abort_after)
    return await reg.execute(call(signal=ctrl.signal))


async def sc_timeout(reg: ToolRegistry, probe: Probe) -> Any:
    async def cooperative(args: Any, ctx: Any) -> str:
        await ctx.signal.wait()
        return "stopped"

    probe.register("echo", cooperative, timeout_ms=100)
    TimeoutPolicy(clock=FakeClock(autojump=True)).install(reg)
    return await reg.execute(call())
