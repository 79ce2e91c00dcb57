"""The child side of ``toolray.code.PythonRuntime``: one program in one confined process.

Loaded by path into the Code Mode template (``toolray.procs``), standard library only: it
never imports toolray, so the program cannot reach the host's objects. The template calls
:func:`prepare` once; each child it forks runs :func:`serve`, which builds the sandbox
(``_child_boot.py`` and its siblings), reports ``ready`` and serves one run. The frame
protocol is described in ``toolray.code``.
"""

from __future__ import annotations

import ast
import asyncio
import builtins
import io
import keyword
import os
import sys
import traceback
import types
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolray.code import _child_boot as boot
    from toolray.code import _child_guard as guard
    from toolray.code._child_wire import MAX_FRAME, Wire, encode
else:  # loaded by path: the sibling files are not on sys.path by themselves
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _child_boot as boot
    import _child_guard as guard
    from _child_wire import MAX_FRAME, Wire, encode

    del sys.path[0]

LOG_BUDGET = 1024 * 1024
LOG_MARKER = f"[toolray.code] log capture truncated at {LOG_BUDGET} bytes"
CO_COROUTINE = 0x80  # inspect.CO_COROUTINE: compiled with a top-level await
RESERVED_GLOBALS = frozenset({"tools", "ToolCallError", "__builtins__", "__name__"})
_NO_VALUE = object()


class ToolCallError(Exception):
    """A failed tool call: ``str(err)`` is the failure message, ``tool_name`` the tool."""

    def __init__(self, tool_name: str, message: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name


ToolCallError.__module__ = "__main__"  # the program's own module: tracebacks say ToolCallError


class LogStream(io.TextIOBase):
    """``sys.stdout`` for the program: each completed line becomes one ``logs`` entry."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        super().__init__()
        self._emit = emit
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            self._emit(line)
        return len(text)

    def drain(self) -> None:
        if self._pending:
            self._emit(self._pending)
            self._pending = ""


class Program:
    """One run: the namespace, the bindings and the pending sub-calls."""

    def __init__(self, wire: Wire, run: dict[str, Any], loop: asyncio.AbstractEventLoop) -> None:
        self.wire = wire
        self.loop = loop
        self.source: str = run["program"]
        self.allowed = frozenset(boot.CONFIG["allowed"])
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 1
        self.log_budget = LOG_BUDGET
        self.stdout = LogStream(self.log)
        self.namespace = self._namespace(run["bindings"])

    # -- output ---------------------------------------------------------------------------
    def log(self, text: str) -> None:
        if self.log_budget < 0:
            return
        self.log_budget -= len(text.encode("utf-8", "surrogatepass")) + 1
        if self.log_budget < 0:
            text = LOG_MARKER
        self.wire.send({"op": "log", "text": text})

    def print(
        self,
        *values: object,
        sep: str | None = " ",
        end: str | None = "\n",
        file: Any = None,
        flush: bool = False,
    ) -> None:
        if file is not None and file is not self.stdout:
            builtins.print(*values, sep=sep, end=end, file=file, flush=flush)
            return
        self.stdout.drain()
        text = (" " if sep is None else sep).join(map(str, values))
        text += "\n" if end is None else end
        self.log(text[:-1] if text.endswith("\n") else text)

    # -- bindings -------------------------------------------------------------------------
    def _namespace(self, bindings: list[list[Any]]) -> dict[str, Any]:
        tools = types.ModuleType("tools", "The tools this program may call.")
        ns: dict[str, Any] = {"__name__": "__main__", "tools": tools}
        ns["ToolCallError"] = ToolCallError
        ns["__builtins__"] = guard.program_builtins(self.print, self.allowed, ns)
        for name, params in bindings:
            fn = self._binding(name, params)
            setattr(tools, name, fn)
            usable = name.isidentifier() and not keyword.iskeyword(name)
            if usable and name not in RESERVED_GLOBALS:
                ns[name] = fn
        return ns

    def _binding(self, name: str, params: list[str] | None) -> Callable[..., Any]:
        async def binding(*args: Any, **kwargs: Any) -> Any:
            return await self.call(name, arguments(name, params, args, kwargs))

        binding.__name__ = binding.__qualname__ = name
        return binding

    async def call(self, name: str, args: dict[str, Any]) -> Any:
        problem = guard.non_json(args, "arguments")
        if problem is not None:
            raise ToolCallError(name, f"tool arguments must be lossless JSON: {problem}")
        call_id = self.next_id
        frame = {"op": "call", "id": call_id, "name": name, "args": args}
        try:
            payload = encode(frame)
        except (ValueError, RecursionError) as err:  # a huge int, or nesting past the stack
            raise ToolCallError(name, f"tool arguments must be lossless JSON: {err}") from None
        if len(payload) > MAX_FRAME:
            raise ToolCallError(name, f"tool arguments exceed {MAX_FRAME} bytes")
        self.next_id += 1
        lone = self.lone()
        future: asyncio.Future[Any] = self.loop.create_future()
        self.pending[call_id] = future
        self.wire.send(frame, payload)
        if lone:
            self.wait(future)
        ok, value = await future
        if not ok:
            raise ToolCallError(name, value)
        return value

    def lone(self) -> bool:
        """Whether nothing else of the program can run before this call's reply.

        No other call pending, no callback ready, no timer set (asyncio's own lists, read
        defensively: without them, never).
        """
        if self.pending:
            return False
        return not (getattr(self.loop, "_ready", True) or getattr(self.loop, "_scheduled", True))

    def wait(self, future: asyncio.Future[Any]) -> None:
        """Block on the socket until ``future`` has its reply.

        Instead of a trip through the event loop, which would wait on the same socket with
        nothing else to do.
        """
        while not future.done():
            self.wire.wait_readable()
            self.on_readable()

    def on_readable(self) -> None:
        data = self.wire.receive()
        if not data:
            os._exit(guard.EXIT_HOST_GONE)
        for frame in self.wire.feed(data):
            future = self.pending.pop(frame.get("id", -1), None)
            if future is not None and not future.done():
                ok = frame.get("ok") is True
                future.set_result((ok, frame.get("value") if ok else str(frame.get("error"))))

    # -- running --------------------------------------------------------------------------
    def execute(self) -> dict[str, Any]:
        try:
            body, last = compile_program(self.source)
        except SyntaxError as err:
            return failed("syntax", f"SyntaxError: {err.msg} (line {err.lineno})")
        os.set_blocking(self.wire.in_fd, False)
        self.loop.add_reader(self.wire.in_fd, self.on_readable)
        sys.stdout = self.stdout
        self.wire.send({"op": "started"})
        try:
            value = self._run(body, last)
        except guard.ModuleNotAllowedError as err:
            return failed("import", str(err))
        except MemoryError:
            self.namespace.clear()
            return failed("memory", guard.memory_message())
        except BaseException as err:  # the program's own failure, SystemExit included
            return failed("exception", describe(err))
        finally:
            self.stdout.drain()
        if value is _NO_VALUE:
            return {"op": "done", "has_result": False, "result": None}
        return completion(value)

    def _run(self, body: types.CodeType, last: types.CodeType | None) -> Any:
        codes = [body] if last is None else [body, last]
        if any(code.co_flags & CO_COROUTINE for code in codes):
            return self.loop.run_until_complete(self._main(body, last))
        # No top-level await: run it outside the loop, so ``asyncio.run(main())`` works.
        asyncio.run = self.asyncio_run
        eval(body, self.namespace)  # running the program is the point
        return _NO_VALUE if last is None else eval(last, self.namespace)

    def asyncio_run(self, main: Coroutine[Any, Any, Any], *, debug: bool | None = None) -> Any:
        """``asyncio.run`` for a program without top-level await: it runs on this loop."""
        if self.loop.is_running():
            main.close()
            raise RuntimeError("asyncio.run() cannot be called from a running event loop")
        return self.loop.run_until_complete(main)

    async def _main(self, body: types.CodeType, last: types.CodeType | None) -> Any:
        await _evaluate(body, self.namespace)
        return _NO_VALUE if last is None else await _evaluate(last, self.namespace)


def arguments(name: str, params: list[str] | None, args: tuple[Any, ...], kwargs: Any) -> Any:
    """The arguments object of one binding call: keywords, one dict, or named positionals."""
    if not args:
        return dict(kwargs)
    if len(args) == 1 and type(args[0]) is dict and not kwargs:
        return dict(args[0])
    if params is None or len(args) > len(params):
        expected = "keyword arguments or one arguments dict" if params is None else params
        raise ToolCallError(name, f"{name}() takes {expected}; got {len(args)} positional")
    mapped = dict(zip(params, args, strict=False))
    for key in kwargs:
        if key in mapped:
            raise ToolCallError(name, f"{name}() got multiple values for argument {key!r}")
    return {**mapped, **kwargs}


def compile_program(source: str) -> tuple[types.CodeType, types.CodeType | None]:
    tree = ast.parse(source, "<program>", "exec", type_comments=False)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        expr = ast.Expression(tree.body[-1].value)
        del tree.body[-1]
        last = compile(expr, "<program>", "eval", flags=flags, dont_inherit=True)
    body = compile(tree, "<program>", "exec", flags=flags, dont_inherit=True)
    return body, last


async def _evaluate(code: types.CodeType, namespace: dict[str, Any]) -> Any:
    result = eval(code, namespace)  # running the program is the point
    if isinstance(result, Coroutine) and code.co_flags & CO_COROUTINE:
        return await result
    return result


def describe(err: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(err), err)).strip()


def failed(kind: str, message: str) -> dict[str, Any]:
    return {"op": "failed", "kind": kind, "message": message}


def completion(value: Any) -> dict[str, Any]:
    problem = guard.non_json(value, "result")
    if problem is not None:
        return failed("invalid-output", f"program completion must be lossless JSON: {problem}")
    frame = {"op": "done", "has_result": True, "result": value}
    try:
        size = len(encode(frame))
    except (ValueError, RecursionError) as err:
        return failed("invalid-output", f"program completion must be lossless JSON: {err}")
    if size > MAX_FRAME:
        return failed("output-limit", f"the result exceeds {MAX_FRAME} bytes")
    return frame


def minimal_env(workdir: str) -> dict[str, str]:
    """The program's whole environment: nothing inherited from the host, so no secrets."""
    path = "/usr/local/bin:/usr/bin:/bin"
    return {
        "PATH": path,
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
    }


def prepare(config: dict[str, Any]) -> None:
    """The template's init hook (see ``_child_boot.prepare``)."""
    boot.prepare(config)


def serve(ctx: Any) -> int:
    """One child: confine, report ready, run one program, exit."""
    workdir: str = ctx.args["workdir"]
    ctx.set_title([sys.executable, "-I", "-S", "-B", "-X", "utf8", __file__], minimal_env(workdir))
    wire = Wire(ctx.channel)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    report = boot.confine(workdir, ctx.pid_namespace_error)
    wire.send({"op": "ready", "confinement": report})
    run = wire.read_blocking(boot.CONFIG["warm_ttl_s"])
    if run.get("op") != "run":
        os._exit(guard.EXIT_HOST_GONE)
    try:
        program = Program(wire, run, loop)
        outcome = program.execute()
        wire.send(outcome)
    except MemoryError:
        guard.release_reserve()
        wire.send(failed("memory", guard.memory_message()))
    os._exit(0)
