"""Python snippets of a Markdown file: extracted, classified, run, their output checked.

A snippet's expected output is written where the reader sees it: a trailing comment on a
``print(...)`` line (``print(x)  # [1, 2]``), or a comment line right after it. Running a
snippet compares what it printed, line by line, with those comments.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@dataclass(frozen=True, slots=True)
class Snippet:
    source: str
    line: int
    kind: str  # "core", "ray" or "farm"

    @property
    def id(self) -> str:
        return f"{self.kind}-L{self.line}"


SHARED_SECTIONS = (
    "## Use with OpenAI / Anthropic / MCP",
    "## Same code, in-process or on Ray",
    "## Code Mode",
)
"""Sections whose snippets have rules of their own; their own tests run them
(``tests/adapters/test_docs.py``, ``tests/actors/test_parity_docs.py``,
``tests/docs/test_code_mode_doc.py``)."""


def section(path: Path, heading: str) -> str:
    """The text of the section of ``path`` that starts with ``heading`` (to the next ``## ``)."""
    text = path.read_text(encoding="utf-8")
    span = _span(text, heading)
    if span is None:
        raise LookupError(f"{path.name} has no section {heading!r}")
    return text[span[0] : span[1]]


def _span(text: str, heading: str) -> tuple[int, int] | None:
    found = re.search("^" + re.escape(heading), text, re.M)
    if found is None:
        return None
    fenced = False
    offset = found.end()
    for line in text[found.end() :].splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif line.startswith("## ") and not fenced:
            return found.start(), offset
        offset += len(line)
    return found.start(), len(text)


def _shared_spans(text: str) -> list[tuple[int, int]]:
    return [span for h in SHARED_SECTIONS if (span := _span(text, h)) is not None]


def snippets(path: Path, within: str | None = None) -> list[Snippet]:
    """The Python blocks of ``path`` (of its section ``within``, when given)."""
    text = path.read_text(encoding="utf-8") if within is None else section(path, within)
    shared = _shared_spans(text) if within is None else []
    out = []
    for match in _BLOCK.finditer(text):
        if any(a <= match.start() < b for a, b in shared):
            continue
        source = match.group(1)
        line = text.count("\n", 0, match.start()) + 2
        if 'RayRuntime.start("cluster")' in source:
            kind = "farm"
        elif "toolray_actors" in source:
            kind = "ray"
        else:
            kind = "core"
        out.append(Snippet(source, line, kind))
    return out


def expected_output(source: str) -> list[str]:
    lines = source.splitlines()
    expected = []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("print("):
            continue
        if "  # " in line:
            expected.append(line.split("  # ", 1)[1].strip())
        elif i + 1 < len(lines) and lines[i + 1].lstrip().startswith("# "):
            expected.append(lines[i + 1].lstrip()[2:].strip())
    return expected


def run_inline(source: str) -> list[str]:
    """Execute ``source`` as a ``__main__`` script; returns its printed lines."""
    buffer = io.StringIO()
    namespace = {"__name__": "__main__"}
    with contextlib.redirect_stdout(buffer):
        exec(compile(source, "<README snippet>", "exec"), namespace)
    # Ray's own driver-side notices ("(raylet) WARNING: N PYTHON worker processes…") can
    # land in the captured stdout on a loaded machine; they are not the snippet's output.
    return [line for line in buffer.getvalue().splitlines() if "(raylet)" not in line]
