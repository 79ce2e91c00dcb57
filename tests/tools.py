"""Tool factories shared by the Ray tests and the contract suite.

This module is pickled by value into the Ray actors (``cloudpickle.register_pickle_by_value``
in ``tests/conftest.py`` and ``tests/contract/conftest.py``), so its bodies run unchanged in
another process. Nothing here appends to a test-side list: a body reports what it saw in its
value, its deferred contexts, or (for "I have started" signals a test must wait on) a marker
file in a directory the test owns.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from toolray import (
    Accept,
    HarnessError,
    ToolDefinition,
    ToolOutput,
    UserMessage,
    define_tool,
    text_block,
)


def _render_json(args: Any, value: Any) -> list[Any]:
    return [text_block(json.dumps(value, sort_keys=True))]


def _render_text(args: Any, value: Any) -> list[Any]:
    return [text_block(str(value))]


JSON_OUT = ToolOutput(schema={"type": "json"}, render=_render_json)
TEXT_OUT = ToolOutput(schema={"type": "string"}, render=_render_text)
RAW_JSON_OUT = ToolOutput(schema={}, render=_render_json)  # for raw ToolDefinitions


class QuotaError(HarnessError):
    """A tool-owned coded error (its class travels by value with this module)."""

    default_code = "QUOTA_EXCEEDED"


def echo_tool(name: str, *, safe: bool = True) -> ToolDefinition:
    """Async body: ``{"echo": <arguments>}``."""

    async def body(args: Any, ctx: Any) -> Any:
        return {"echo": args}

    return define_tool(
        name=name,
        description="Echo the arguments",
        parameters={"text": {"type": "string"}},
        output=JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def upper_tool(name: str, *, safe: bool = True) -> ToolDefinition:
    """Sync body (thread pool): the upper-cased ``text``."""

    def body(args: Any, ctx: Any) -> Any:
        return str(args["text"]).upper()

    return define_tool(
        name=name,
        description="Upper-case the text",
        parameters={"text": {"type": "string", "required": True}},
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def raw_echo_tool(name: str) -> ToolDefinition:
    """A raw ``ToolDefinition`` (no ``define_tool`` argument check): returns its arguments."""

    def body(args: Any, ctx: Any) -> Any:
        return {"received": args}

    return ToolDefinition(
        name=name,
        description="Echo whatever arrives",
        parameters={"type": "object"},
        output=ToolOutput(schema={}, render=_render_json),
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def constant_tool(name: str, value: str) -> ToolDefinition:
    """Returns ``value`` (tells a scoped shadow from the global entry)."""

    def body(args: Any, ctx: Any) -> Any:
        return value

    return define_tool(
        name=name,
        description=f"Returns {value}",
        parameters={},
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def failing_tool(
    name: str = "fail", kind: str = "harness", *, defer: str | None = None
) -> ToolDefinition:
    """Raises: ``harness`` (ENOSPC), ``subclass`` (QuotaError) or ``plain`` (ValueError).

    With ``defer``, the body defers a context before raising (it survives the throw).
    """

    def body(args: Any, ctx: Any) -> Any:
        if defer is not None:
            ctx.defer_context(UserMessage([text_block(defer)], source=name))
        if kind == "harness":
            raise HarnessError("disk full", "ENOSPC")
        if kind == "subclass":
            raise QuotaError("quota exceeded for today")
        raise ValueError("plain failure")

    return define_tool(
        name=name,
        description="Always fails",
        parameters={},
        output=JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def bad_output_tool(name: str) -> ToolDefinition:
    """Declares a string output and returns ``42``."""

    async def body(args: Any, ctx: Any) -> Any:
        return 42

    return define_tool(
        name=name,
        description="Breaks its output contract",
        parameters={},
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def context_tool(name: str, *, safe: bool = True) -> ToolDefinition:
    """Defers one context per entry of ``notes`` (in order); concludes if ``conclude``."""

    async def body(args: Any, ctx: Any) -> Any:
        for note in args.get("notes", []):
            ctx.defer_context(UserMessage([text_block(note)], source=name, meta={"note": note}))
        if args.get("conclude"):
            ctx.conclude_turn()
        return "noted"

    return define_tool(
        name=name,
        description="Defers contexts",
        parameters={
            "notes": {"type": "array", "items": {"type": "string"}},
            "conclude": {"type": "boolean"},
        },
        output=TEXT_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def waiting_tool(
    name: str, directory: str, *, timeout_ms: float | None = None, safe: bool = True
) -> ToolDefinition:
    """Cooperative: marks ``<directory>/<key>.started``, then waits for its signal.

    With ``note``, it first defers a context. Returns ``"stopped"`` when the signal fires,
    ``"never stopped"`` after ``max_s`` seconds (a bound: a lost abort fails, never hangs).
    """

    async def body(args: Any, ctx: Any) -> Any:
        if args.get("note"):
            ctx.defer_context(UserMessage([text_block(args["note"])], source=name))
        Path(directory, f"{args['key']}.started").touch()
        try:
            await asyncio.wait_for(ctx.signal.wait(), timeout=float(args.get("max_s", 10)))
        except TimeoutError:
            return "never stopped"
        return "stopped"

    return define_tool(
        name=name,
        description="Waits for its signal",
        parameters={
            "key": {"type": "string", "required": True},
            "max_s": {"type": "number"},
            "note": {"type": "string"},
        },
        output=TEXT_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: safe,
    )


def quick_tool(name: str, *, timeout_ms: float | None = None) -> ToolDefinition:
    """Returns at once (a budgeted tool that finishes in time keeps its result)."""

    async def body(args: Any, ctx: Any) -> Any:
        return "quick"

    return define_tool(
        name=name,
        description="Returns at once",
        parameters={},
        output=TEXT_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: True,
    )


def deny_guard(tool_name: str, reason: str) -> Any:
    """A guard denying calls of ``tool_name`` (abstains for every other tool)."""

    def guard(execution: Any) -> str | None:
        return reason if execution.name == tool_name else None

    return guard


def post_note(tool_name: str, note: str) -> Any:
    """A post-execute listener adding a context to every call of ``tool_name``."""

    async def listener(execution: Any, result: Any, next_: Any) -> Any:
        decision = await next_()
        if execution.name != tool_name:
            return decision
        return Accept(additional_contexts=[UserMessage([text_block(note)], source="post")])

    return listener


# ---------------------------------------------------------------- Ray-layer tools
_STR_OUT = ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))])


def text_echo_tool(name: str = "echo", *, safe: bool = True) -> Any:
    """Echo ``text`` back with the pid of the process that ran the body (async body)."""

    async def body(args: Any, ctx: Any) -> Any:
        return {"text": args.get("text", ""), "pid": os.getpid()}

    return define_tool(
        name=name,
        description="Echo the text",
        parameters={"text": {"type": "string"}},
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def cooperative_tool(name: str = "cooperative") -> Any:
    """Waits for its signal (or 30 s) and then returns normally."""

    async def body(args: Any, ctx: Any) -> Any:
        try:
            await asyncio.wait_for(ctx.signal.wait(), timeout=30)
        except TimeoutError:
            return "finished"
        return "stopped"

    return define_tool(
        name=name,
        description="Cooperative",
        parameters={},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def stubborn_tool(name: str, kind: str, *, timeout_ms: float | None = None) -> Any:
    """Ignores its signal: ``sleep_loop`` (short sleeps), ``cpu`` (a Python loop) or
    ``block`` (one long C-level sleep that only a kill stops)."""

    def body(args: Any, ctx: Any) -> Any:
        end = time.monotonic() + float(args.get("seconds", 30))
        if kind == "block":
            time.sleep(end - time.monotonic())
        elif kind == "cpu":
            x = 0
            while time.monotonic() < end:
                x += 1
        else:
            while time.monotonic() < end:
                time.sleep(0.01)
        return "ignored the signal"

    return define_tool(
        name=name,
        description=f"Stubborn ({kind})",
        parameters={"seconds": {"type": "number"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: True,
    )


def crash_tool(name: str = "crash") -> Any:
    """Kills its own worker process."""

    def body(args: Any, ctx: Any) -> Any:
        os._exit(17)

    return define_tool(
        name=name,
        description="Crash the worker",
        parameters={},
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


# ---------------------------------------------------------------- nested dispatch
def _nested_view(result: Any) -> dict[str, Any]:
    """What a composite reports of one nested result (comparable across backends)."""
    return {
        "wire": result.to_wire(),
        "value": getattr(result, "value", None),
        "meta": result.meta,
        "contexts": [m.content[0]["text"] for m in result.additional_contexts],
        "concludes_turn": result.concludes_turn,
    }


def composite_tool(name: str, *, sync: bool = False) -> ToolDefinition:
    """Dispatches ``calls`` (``[{"name", "arguments"?, "call_id"?, "tag"?}]``) nested, in order.

    ``tag`` adds this execution's token id to the nested arguments as ``parent`` (a
    ``whoami`` tool then checks its parent). The nested results are returned and also
    deferred as one context's ``meta`` (so they survive an abort of the composite).
    ``sync`` uses ``ctx.dispatch_sync`` from a sync body (a thread).
    """

    def requests(args: Any, ctx: Any) -> list[tuple[str, Any, Any]]:
        out = []
        for c in args["calls"]:
            arguments = dict(c.get("arguments", {}))
            if c.get("tag"):
                arguments["parent"] = ctx.token.id
            out.append((c["name"], arguments, c.get("call_id")))
        return out

    def report(ctx: Any, views: list[Any]) -> list[Any]:
        ctx.defer_context(UserMessage([text_block("nested")], source=name, meta=views))
        return views

    async def body(args: Any, ctx: Any) -> Any:
        views = []
        for inner, arguments, call_id in requests(args, ctx):
            views.append(_nested_view(await ctx.dispatch(inner, arguments, call_id=call_id)))
        return report(ctx, views)

    def sync_body(args: Any, ctx: Any) -> Any:
        views = []
        for inner, arguments, call_id in requests(args, ctx):
            views.append(_nested_view(ctx.dispatch_sync(inner, arguments, call_id=call_id)))
        return report(ctx, views)

    return ToolDefinition(
        name=name,
        description="Calls other tools",
        parameters={"type": "object", "properties": {"calls": {"type": "array"}}},
        output=RAW_JSON_OUT,
        execute=sync_body if sync else body,
    )


def whoami_tool(name: str) -> ToolDefinition:
    """Reports the nested call's identity (``parent``: whether it is the tagged caller)."""

    async def body(args: Any, ctx: Any) -> Any:
        parent = ctx.parent
        return {
            "call_id": ctx.call_id,
            "root_call_id": ctx.root_call_id,
            "scope": ctx.scope,
            "nested": parent is not None,
            "parent_is_caller": parent is not None and parent.id == args.get("parent"),
        }

    return ToolDefinition(
        name=name,
        description="Who am I",
        parameters={"type": "object", "properties": {"parent": {"type": "string"}}},
        output=RAW_JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


def non_json_nested_tool(name: str, inner: str) -> ToolDefinition:
    """Dispatches ``inner`` with a NaN, a tuple and a set: each is that call's P-ARGS-4."""

    async def body(args: Any, ctx: Any) -> Any:
        bad = [{"x": float("nan")}, {"t": (1, 2)}, {"s": {1}}]
        return [(await ctx.dispatch(inner, arguments)).to_wire() for arguments in bad]

    return ToolDefinition(
        name=name,
        description="Sends bad nested arguments",
        parameters={"type": "object"},
        output=RAW_JSON_OUT,
        execute=body,
    )


def token_tool(name: str) -> ToolDefinition:
    """Returns its own execution's token id (a test then replays it: a settled parent)."""

    async def body(args: Any, ctx: Any) -> Any:
        return ctx.token.id

    return ToolDefinition(
        name=name,
        description="Token id",
        parameters={"type": "object"},
        output=TEXT_OUT,
        execute=body,
    )


def env_tool(name: str, variable: str, placement: Any = None) -> ToolDefinition:
    """Returns ``os.environ.get(variable)`` and the node it ran on.

    A call process (isolation ``"call"``) is told its node; a shared worker asks Ray.
    """

    def body(args: Any, ctx: Any) -> Any:
        node = os.environ.get("TOOLRAY_NODE_ID")
        if node is None:
            import ray

            node = ray.get_runtime_context().get_node_id()
        return {"env": os.environ.get(variable), "node": node}

    return ToolDefinition(
        name=name,
        description="Environment probe",
        parameters={"type": "object"},
        output=RAW_JSON_OUT,
        execute=body,
        timeout_ms=None,
        placement=placement,
        is_concurrency_safe=lambda args: True,
    )


class RecordingExecutor:
    """A picklable ``ToolExecutor`` answering every call with ``<label>:<call id>``.

    It stands in for a user's executor: ``set_executor`` must make the batches of its
    scope run here (in the executor actor on Ray), not on the default executor.
    """

    sections: tuple[Any, ...] = ()

    def __init__(self, label: str) -> None:
        self.label = label

    def describe(self, definitions: Any) -> Any:
        from toolray import ToolModelInput

        return ToolModelInput(schemas=[], known_names=[d.name for d in definitions])

    async def execute(self, batch: Any) -> Any:
        from toolray import ToolBatchResult, ToolCallResult, ToolExecutionSuccess

        results = tuple(
            ToolCallResult(
                c.id,
                ToolExecutionSuccess(
                    value=f"{self.label}:{c.id}",
                    content=[text_block(f"{self.label}:{c.id}")],
                ),
            )
            for c in batch.calls
        )
        return ToolBatchResult(results=results, additional_contexts=(), concluded=False)


# ---------------------------------------------------------------- conditions and hooks
def when_model(model: str) -> Any:
    """A ``when`` admitting the tool for steps of ``model``."""

    def condition(context: Any) -> bool:
        return bool(context.model.model == model)

    return condition


def when_raises(message: str) -> Any:
    """A ``when`` that raises ``LookupError(message)``."""

    async def condition(context: Any) -> bool:
        raise LookupError(message)

    return condition


def when_waits(directory: str, key: str) -> Any:
    """An async ``when`` that marks ``<directory>/<key>.started`` and waits for its signal."""

    async def condition(context: Any) -> bool:
        Path(directory, f"{key}.started").touch()
        await asyncio.wait_for(context.signal.wait(), timeout=20)
        return True

    return condition


def deny_nested(tool_name: str, reason: str) -> Any:
    """A pre-execute listener denying *nested* calls of ``tool_name`` (model calls pass)."""

    async def listener(execution: Any, next_: Any) -> Any:
        from toolray import Deny

        if execution.name == tool_name and execution.parent is not None:
            return Deny(reason)
        return await next_()

    return listener


def deny_with_schema(tool_name: str) -> Any:
    """A pre-execute listener denying ``tool_name`` with the execution's ``schema`` as text."""

    async def listener(execution: Any, next_: Any) -> Any:
        from toolray import Deny

        if execution.name == tool_name:
            return Deny(f"schema={json.dumps(execution.schema, sort_keys=True)}")
        return await next_()

    return listener


def run_code_dispatches(inner: str) -> Any:
    """An ``on_execute`` wrapper standing in for Code Mode: ``run_code`` runs ``inner`` nested.

    It runs in the executor (``toolray.lowlevel.run_nested``, with the run_code execution
    as parent) and answers ``{"logs": [], "result": <the nested result's wire>}``.
    """

    async def wrapper(execution: Any, next_: Any) -> Any:
        from toolray import ToolExecutionSuccess
        from toolray.lowlevel import run_nested, thaw_json

        if execution.name != "run_code":
            return await next_()
        sub_id = f"{execution.call_id}:ptc:1"
        nested = await run_nested(execution.host, execution, inner, {}, call_id=sub_id)
        value = {"logs": [], "result": thaw_json(nested.to_wire())}
        return ToolExecutionSuccess(value=value, content=[text_block("ran")])

    return wrapper


def impersonating_tool(name: str, inner: str) -> ToolDefinition:
    """Dispatches ``inner`` claiming to be the execution ``args["as"]`` (a forged parent).

    Returns the text of the error the dispatch raised (``"accepted"`` if it was not).
    """

    async def body(args: Any, ctx: Any) -> Any:
        ctx.token = type(ctx.token)(args["as"])
        try:
            await ctx.dispatch(inner, {})
        except Exception as err:
            return f"{type(err).__name__}: {err}"
        return "accepted"

    return ToolDefinition(
        name=name,
        description="Forges its parent token",
        parameters={"type": "object", "properties": {"as": {"type": "string"}}},
        output=TEXT_OUT,
        execute=body,
    )


def gate_tool(name: str, directory: str, *, safe: bool = True) -> Any:
    """Marks ``<directory>/<key>.started``, then waits until ``<key>.open`` exists.

    Ignores its signal (only the gate opens it); returns ``{"key", "pid"}`` once open, or
    ``"never opened"`` after ``max_s`` seconds (a bound: a test that forgets fails, never
    hangs). ``safe=False`` makes every call an exclusive barrier.
    """

    async def body(args: Any, ctx: Any) -> Any:
        key = args["key"]
        Path(directory, f"{key}.started").touch()
        gate = Path(directory, f"{key}.open")
        end = time.monotonic() + float(args.get("max_s", 20))
        while not gate.exists():
            if time.monotonic() > end:
                return "never opened"
            await asyncio.sleep(0.005)
        return {"key": key, "pid": os.getpid()}

    return define_tool(
        name=name,
        description="Waits for its gate file",
        parameters={"key": {"type": "string", "required": True}, "max_s": {"type": "number"}},
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: safe,
    )


def deaf_async_tool(name: str, *, timeout_ms: float | None = None) -> Any:
    """An async body that ignores its signal (only a task cancel or a kill stops it)."""

    async def body(args: Any, ctx: Any) -> Any:
        await asyncio.sleep(float(args.get("seconds", 30)))
        return "ignored the signal"

    return define_tool(
        name=name,
        description="Deaf (async)",
        parameters={"seconds": {"type": "number"}},
        output=_STR_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        is_concurrency_safe=lambda args: True,
    )


# ---------------------------------------------------------------- per-call isolation
def _wait_for(path: Path, max_s: float) -> bool:
    end = time.monotonic() + max_s
    while not path.exists():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def faulty_tool(name: str, kind: str, directory: str, placement: Any = None) -> ToolDefinition:
    """A body that faults once ``<directory>/go`` exists: ``exit`` (``os._exit``),
    ``segfault`` (reads address 0), ``memory`` (allocates 64 GiB, past any per-call limit),
    or ``hang`` (sleeps 30 s in C at once, deaf to its signal; give it a ``timeout_ms``)."""

    def body(args: Any, ctx: Any) -> Any:
        if kind == "hang":
            time.sleep(30)
            return "ignored its deadline"
        if not _wait_for(Path(directory, "go"), 20):
            return "never told to go"
        if kind == "exit":
            os._exit(3)
        if kind == "segfault":
            import ctypes

            ctypes.string_at(0)
        if kind == "memory":
            return len(bytearray(64 * 2**30))
        raise ValueError(f"unknown fault {kind}")

    return define_tool(
        name=name,
        description=f"Faults ({kind})",
        parameters={},
        output=JSON_OUT,
        execute=body,
        timeout_ms=4000 if kind == "hang" else None,
        is_concurrency_safe=lambda args: True,
        placement=placement,
    )


def patient_tool(name: str, directory: str, placement: Any = None) -> ToolDefinition:
    """Marks ``<directory>/<key>.started``, waits until ``<directory>/open`` exists (bounded),
    then returns where it ran: its pid and its two ancestors (a call process's are its
    template and its worker)."""

    async def body(args: Any, ctx: Any) -> Any:
        key = args["key"]
        Path(directory, f"{key}.started").touch()
        gate = Path(directory, "open")
        end = time.monotonic() + 20
        while not gate.exists():
            if time.monotonic() > end:
                return "never opened"
            await asyncio.sleep(0.005)
        import psutil

        above = psutil.Process().parents()  # its template, the template's keeper, its worker
        return {"key": key, "pid": os.getpid(), "parent": above[0].pid, "worker": above[2].pid}

    return define_tool(
        name=name,
        description="Waits for its gate, then says where it ran",
        parameters={"key": {"type": "string", "required": True}},
        output=JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
        placement=placement,
    )


def journal_tool(
    name: str, directory: str, placement: Any = None, *, pids: bool = False
) -> ToolDefinition:
    """Appends ``start <key>`` and ``end <key>`` lines to ``<directory>/journal`` around a
    short sleep (``ms``, default 5), from whatever process runs it; ``x: true`` makes the call
    exclusive, ``crash: true`` ends its process after the ``start`` line. ``pids``: the start
    line ends with the pid of the process running the body (``start <key> <pid>``)."""

    def body(args: Any, ctx: Any) -> Any:
        key = args["key"]
        fd = os.open(Path(directory, "journal"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (f"start {key} {os.getpid()}\n" if pids else f"start {key}\n").encode())
            if args.get("crash"):
                os._exit(3)
            time.sleep(float(args.get("ms", 5)) / 1000)
            os.write(fd, f"end {key}\n".encode())
        finally:
            os.close(fd)
        return key

    return define_tool(
        name=name,
        description="Journals its start and end",
        parameters={
            "key": {"type": "string", "required": True},
            "x": {"type": "boolean"},
            "crash": {"type": "boolean"},
            "ms": {"type": "number"},
        },
        output=_STR_OUT,
        execute=body,
        is_concurrency_safe=lambda args: not args.get("x"),
        placement=placement,
    )


def nap_tool(
    name: str, directory: str, *, timeout_ms: float | None = None, placement: Any = None
) -> ToolDefinition:
    """Sync body deaf to its signal: marks ``<directory>/<key>.started`` (its start time, as
    ``time.time()``), then sleeps ``s`` seconds in one C-level sleep; returns its key."""

    def body(args: Any, ctx: Any) -> Any:
        Path(directory, f"{args['key']}.started").write_text(repr(time.time()))
        time.sleep(float(args.get("s", 0)))
        return args["key"]

    return define_tool(
        name=name,
        description="Naps, deaf to its signal",
        parameters={"key": {"type": "string", "required": True}, "s": {"type": "number"}},
        output=TEXT_OUT,
        execute=body,
        timeout_ms=timeout_ms,
        placement=placement,
        is_concurrency_safe=lambda args: True,
    )
