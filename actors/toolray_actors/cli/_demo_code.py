"""The Code Mode scene of ``toolray demo`` (and the ``code`` scenario of ``toolray trace``).

A scope presenting ``code`` sees one tool, ``run_code``, and the kit as typed Python stubs
(its ``tools:sdk`` prompt section). One model call runs a program that reads two files
together, greps, writes a file and returns only the TODO lines: four sub-calls, each
through the scope's pipeline and on a worker, shown nested under the ``run_code`` call.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolray import AbortController, LogStep, MemoryEventLog, ToolBatchInput, ToolCall
from toolray.code import PythonRuntime

from ._timeline import render_results, render_timeline

__all__ = ("CODE_SCOPE", "code_calls", "code_scene")

CODE_SCOPE = "demo-coder"


def code_calls(ws: Path) -> list[ToolCall]:
    """One ``run_code`` call: two reads together, a grep, a write; the TODOs come back."""
    program = textwrap.dedent(
        f"""\
        import asyncio
        readme, notes = await asyncio.gather(
            read_file(path={str(ws / "README.md")!r}), read_file(path={str(ws / "notes.md")!r}))
        todos = (await grep(pattern="TODO", root={str(ws)!r}))["matches"]
        await write_file(path={str(ws / "TODO.md")!r}, text="\\n".join(todos) + "\\n")
        print(f"read {{readme['lines'] + notes['lines']}} lines, found {{len(todos)}} TODO(s)")
        todos
        """
    )
    arguments = {"code": program, "description": "Collect the workspace's TODO lines"}
    return [ToolCall("c1", "run_code", json.dumps(arguments))]


async def code_scene(session: Any, say: Callable[..., None]) -> None:
    """Scene 6: Code Mode on Ray (``session`` is the demo's ``DemoSession``)."""
    rt = session.rt
    session.disposers.append(rt.scope(CODE_SCOPE).present_as("code"))
    sections = {s.id: s.text for s in rt.registry.prompt_sections(CODE_SCOPE)}
    stubs = re.findall(r"^async def .*$", sections["tools:sdk"], re.M)
    handle = rt.executor(CODE_SCOPE)
    log = LogStep(1, 1, MemoryEventLog())
    signal = AbortController().signal
    batch = ToolBatchInput(code_calls(session.workspace), signal, scope=CODE_SCOPE, log=log)
    result = await handle.execute_batch(batch)
    records = [e["type"] for e in log.sink.events]  # type: ignore[attr-defined]
    say("", "=== 6. Code Mode: one program calls several tools")
    say(
        *textwrap.wrap(
            f"scope {CODE_SCOPE!r} presents `code`: the model sees only run_code, and the tools"
            " as typed stubs in its prompt. The program runs in a fresh confined Python process;"
            " each tool call it makes goes through the scope's pipeline to a worker.",
            width=96,
            initial_indent="    ",
            subsequent_indent="    ",
        )
    )
    local = PythonRuntime(confinement=rt.config.code.confinement, warm=0)  # this machine's layers
    say(f"  {local.confinement().describe()}")
    local.close()
    say("", "  tools:sdk (the stubs):", *(f"    {line}" for line in stubs))
    say("", *render_timeline(list(handle.last_trace)), "", "  results:")
    say(*render_results(result.results))
    say(
        f"  event log: {records.count('tool/ptc-dispatch')} tool/ptc-dispatch records between"
        " run_code's tool/call and tool/result;",
        "  the model sees only the program's output",
    )
