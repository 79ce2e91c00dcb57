"""The tools ``toolray demo`` and ``toolray trace`` register: a small, realistic agent kit.

Everything here is module level so cloudpickle can ship it; the commands register this
module by value (``cloudpickle.register_pickle_by_value``), so a worker never has to import
it. The kit:

- ``read_file`` and ``grep``: read-only, concurrency-safe (they form parallel groups);
- ``write_file``: a writer, not concurrency-safe (an exclusive barrier);
- ``fetch_url``: a slow network-like call (an async sleep that honours its signal);
- ``stubborn``: ignores its signal (one blocking C-level ``time.sleep``) and has a
  ``timeout_ms``, so only killing its worker stops it;
- ``crash``: kills its own process (``os._exit``), like a segfaulting native extension.

File tools sleep :data:`IO_LATENCY_S` (a simulated slow disk), so that the timelines show
real overlap instead of sub-millisecond slivers.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
from pathlib import Path
from typing import NotRequired, TypedDict

from toolray import (
    ContentBlock,
    ToolDefinition,
    ToolOutput,
    ToolRunContext,
    define_tool,
    text_block,
)

__all__ = (
    "IO_LATENCY_S",
    "STUBBORN_TIMEOUT_MS",
    "crash",
    "demo_tools",
    "fetch_url",
    "grep",
    "make_workspace",
    "read_file",
    "stubborn",
    "write_file",
)

IO_LATENCY_S = 0.12
"""Simulated storage latency of the file tools (seconds)."""

STUBBORN_TIMEOUT_MS = 300
"""``stubborn``'s deadline: the timeout policy fires it, the Ray layer kills the worker."""

_FILES = {
    "README.md": "# toolray demo workspace\nTools run on Ray workers; results return in order.\n",
    "notes.md": "ray: one registry actor per namespace\nray: one executor actor per scope\n",
    "src/app.py": "import ray  # TODO: add retries\n\n\ndef main():\n    return 42\n",
}


def make_workspace(root: str | os.PathLike[str]) -> Path:
    """Create the small directory of files the file tools work on; returns its path."""
    base = Path(root)
    for name, text in _FILES.items():
        path = base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return base


# ---------------------------------------------------------------- arguments and values
class PathArgs(TypedDict):
    path: str


class GrepArgs(TypedDict):
    pattern: str
    root: str


class WriteArgs(TypedDict):
    path: str
    text: str


class FetchArgs(TypedDict):
    url: str
    latency_ms: NotRequired[float]


class SecondsArgs(TypedDict):
    seconds: NotRequired[float]


class FileText(TypedDict):
    path: str
    lines: int
    text: str


class GrepMatches(TypedDict):
    pattern: str
    matches: list[str]


class Written(TypedDict):
    path: str
    bytes: int


class Fetched(TypedDict):
    url: str
    status: int
    bytes: int


# ---------------------------------------------------------------- bodies
def read_file(args: PathArgs, ctx: ToolRunContext) -> FileText:
    """Read a text file (read-only, safe to run alongside other reads)."""
    time.sleep(IO_LATENCY_S)
    text = Path(args["path"]).read_text(encoding="utf-8")
    return {"path": args["path"], "lines": len(text.splitlines()), "text": text}


def grep(args: GrepArgs, ctx: ToolRunContext) -> GrepMatches:
    """Search the files under ``root`` for a regular expression."""
    time.sleep(IO_LATENCY_S)
    pattern = re.compile(args["pattern"])
    root = Path(args["root"])
    matches = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in sorted(p for p in root.rglob("*") if p.is_file())
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    return {"pattern": args["pattern"], "matches": matches}


def write_file(args: WriteArgs, ctx: ToolRunContext) -> Written:
    """Write a text file (a side effect: never concurrent with anything else)."""
    time.sleep(IO_LATENCY_S)
    path = Path(args["path"])
    path.parent.mkdir(parents=True, exist_ok=True)
    data = args["text"].encode("utf-8")
    path.write_bytes(data)
    return {"path": args["path"], "bytes": len(data)}


async def fetch_url(args: FetchArgs, ctx: ToolRunContext) -> Fetched:
    """A simulated HTTP GET: waits ``latency_ms`` or until the call is cancelled."""
    try:
        await asyncio.wait_for(ctx.signal.wait(), timeout=args.get("latency_ms", 200) / 1000)
    except TimeoutError:
        body = f"<html><title>{args['url']}</title></html>"
        return {"url": args["url"], "status": 200, "bytes": len(body)}
    ctx.signal.throw_if_aborted()  # cancelled: stop at once, as a real client would
    raise AssertionError("unreachable")


def stubborn(args: SecondsArgs, ctx: ToolRunContext) -> str:
    """Ignores its signal: one blocking C-level sleep that only a process kill stops."""
    time.sleep(float(args.get("seconds", 30)))
    return "finished (nobody stopped me)"


def crash(args: object, ctx: ToolRunContext) -> str:
    """Kills its own worker process, as a segfaulting native extension would."""
    os._exit(17)


# ---------------------------------------------------------------- rendering
def _render_read(args: object, value: FileText) -> list[ContentBlock]:
    name = Path(value["path"]).name
    lines = value["lines"]
    return [text_block(f"{name}: {lines} line{'s' if lines != 1 else ''}\n{value['text']}")]


def _render_grep(args: object, value: GrepMatches) -> list[ContentBlock]:
    found = list(value["matches"])
    head = f"{len(found)} match(es) for /{value['pattern']}/"
    return [text_block("\n".join([head, *found]))]


def _render_write(args: object, value: Written) -> list[ContentBlock]:
    return [text_block(f"wrote {value['bytes']} bytes to {Path(value['path']).name}")]


def _render_fetch(args: object, value: Fetched) -> list[ContentBlock]:
    return [text_block(f"{value['status']} OK {value['url']} ({value['bytes']} bytes)")]


def _render_text(args: object, value: object) -> list[ContentBlock]:
    return [text_block(str(value))]


def _safe(args: object) -> bool:
    return True


def _unsafe(args: object) -> bool:
    return False


_JSON = {"type": "json"}


def demo_tools() -> tuple[ToolDefinition, ...]:
    """The kit, in the order the model would see it."""
    return (
        define_tool(
            name="read_file",
            description="Read a text file.",
            parameters={"path": {"type": "string", "required": True}},
            output=ToolOutput(schema=_JSON, render=_render_read),
            execute=read_file,
            is_concurrency_safe=_safe,
        ),
        define_tool(
            name="grep",
            description="Search files under a directory for a regular expression.",
            parameters={
                "pattern": {"type": "string", "required": True},
                "root": {"type": "string", "required": True},
            },
            output=ToolOutput(schema=_JSON, render=_render_grep),
            execute=grep,
            is_concurrency_safe=_safe,
        ),
        define_tool(
            name="write_file",
            description="Write a text file (replaces its content).",
            parameters={
                "path": {"type": "string", "required": True},
                "text": {"type": "string", "required": True},
            },
            output=ToolOutput(schema=_JSON, render=_render_write),
            execute=write_file,
            is_concurrency_safe=_unsafe,
        ),
        define_tool(
            name="fetch_url",
            description="Fetch a URL (simulated network latency).",
            parameters={
                "url": {"type": "string", "required": True},
                "latency_ms": {"type": "number"},
            },
            output=ToolOutput(schema=_JSON, render=_render_fetch),
            execute=fetch_url,
            timeout_ms=10_000,
            is_concurrency_safe=_safe,
        ),
        define_tool(
            name="stubborn",
            description="A legacy tool that ignores cancellation.",
            parameters={"seconds": {"type": "number"}},
            output=ToolOutput(schema={"type": "string"}, render=_render_text),
            execute=stubborn,
            timeout_ms=STUBBORN_TIMEOUT_MS,
            is_concurrency_safe=_safe,
        ),
        define_tool(
            name="crash",
            description="A native extension that segfaults.",
            parameters={},
            output=ToolOutput(schema={"type": "string"}, render=_render_text),
            execute=crash,
            is_concurrency_safe=_unsafe,
        ),
    )
