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


SHARED_SECTIONS = ("## Use with OpenAI / Anthropic / MCP",)
"""Sections whose snippets share one namespace; their own tests run them
(``tests/adapters/test_docs.py``)."""


def _shared_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for heading in SHARED_SECTIONS:
        start = text.find(heading)
        if start != -1:
            end = text.find("\n## ", start + len(heading))
            spans.append((start, end if end != -1 else len(text)))
    return spans


def snippets(path: Path) -> list[Snippet]:
    text = path.read_text(encoding="utf-8")
    shared = _shared_spans(text)
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
    return buffer.getvalue().splitlines()
