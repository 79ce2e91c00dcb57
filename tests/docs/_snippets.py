"""The Python blocks of the README and of every page under ``docs/``: found, grouped, run.

Rules a page follows (the docs' contributors read them in ``docs/`` too):

- every ```` ```python ```` block runs on its own, imports included;
- a block preceded by the line ``<!-- continuation -->`` continues the previous block: it
  runs in the same namespace (and the same working directory);
- a block whose first line is ``# <name>.py`` is a file, not a program: it is written to
  ``<name>.py`` in the working directory for the blocks after it (an MCP server a later
  block starts, a farm driver another test runs as two processes);
- a block's expected output is written where the reader sees it: the comment after a
  ``print(...)`` (``print(x)  # [1, 2]``) or the ``# …`` lines right under it. Running the
  block checks that each of those texts was printed, in order (whitespace aside).
- a block that uses Ray (``toolray_actors``) runs against the test session's local Ray.
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CONTINUATION = "<!-- continuation -->"
_FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_FILE = re.compile(r"# ([\w-]+\.py)$")


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/ (pages added later included)."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


@dataclass(frozen=True, slots=True)
class Block:
    """One Python block of a page."""

    path: Path
    line: int
    source: str
    continues: bool

    @property
    def file_name(self) -> str | None:
        """``<name>.py`` for a file block, else ``None``."""
        first = self.source.splitlines()[0] if self.source else ""
        match = _FILE.match(first)
        return match.group(1) if match else None

    @property
    def needs_ray(self) -> bool:
        return "toolray_actors" in self.source

    @property
    def where(self) -> str:
        """``<page>:<line>``, relative to the repository when the page is in it."""
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


@dataclass(frozen=True, slots=True)
class Group:
    """A block and the continuations after it: one program, one namespace."""

    blocks: tuple[Block, ...]

    @property
    def id(self) -> str:
        return self.blocks[0].where

    @property
    def needs_ray(self) -> bool:
        return any(b.needs_ray for b in self.blocks)


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """The Python blocks of ``path`` (or of ``text``), in order."""
    text = path.read_text(encoding="utf-8") if text is None else text
    out = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        line = text.count("\n", 0, match.start()) + 2
        out.append(Block(path, line, match.group(1), before == CONTINUATION))
    return out


def groups(path: Path) -> list[Group]:
    """The programs of ``path``: each block with the continuations that follow it."""
    out: list[list[Block]] = []
    for block in blocks(path):
        if block.continues:
            if not out:
                raise ValueError(f"{path}:{block.line}: a continuation with nothing before it")
            out[-1].append(block)
        else:
            out.append([block])
    return [Group(tuple(g)) for g in out]


def expected_output(source: str) -> list[str]:
    """The texts a block says it prints, in order."""
    lines = source.splitlines()
    expected = []
    for i, line in enumerate(lines):
        if not line.lstrip().startswith("print("):
            continue
        if "  # " in line:
            expected.append(line.split("  # ", 1)[1].strip())
            continue
        under = []
        for following in lines[i + 1 :]:
            if not following.lstrip().startswith("# "):
                break
            under.append(following.lstrip()[2:])
        if under:
            expected.append(" ".join(under))
    return expected


def _squash(text: str) -> str:
    return "".join(text.split())


def printed_lines(output: str) -> list[str]:
    """What a block printed, without Ray's own notices (``(raylet) …``, worker prefixes)."""
    return [
        line
        for line in output.splitlines()
        if "(raylet)" not in line and not re.match(r"^(\x1b\[\d+m)?\(\w+ pid=\d+", line)
    ]


def check_output(source: str, output: str) -> None:
    """Every expected text of ``source`` was printed, in order (whitespace aside)."""
    got = _squash("\n".join(printed_lines(output)))
    position = 0
    for want in expected_output(source):
        found = got.find(_squash(want), position)
        assert found != -1, f"expected {want!r} in the output, after what came before:\n{output}"
        position = found + len(_squash(want))


def run_group(group: Group, workdir: Path) -> None:
    """Run a group's blocks in one namespace, in ``workdir``; check each block's output."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in group.blocks:
        if block.file_name is not None:
            (workdir / block.file_name).write_text(block.source, encoding="utf-8")
            continue
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            exec(compile(block.source, block.where, "exec"), namespace)
        check_output(block.source, buffer.getvalue())


def run_inline(source: str) -> list[str]:
    """Execute ``source`` as a ``__main__`` script; returns its printed lines."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(source, "<docs block>", "exec"), {"__name__": "__main__"})
    return printed_lines(buffer.getvalue())


def section(path: Path, heading: str) -> str:
    """The text of the section of ``path`` that starts with ``heading`` (to the next one)."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    found = re.search("^" + re.escape(heading), text, re.M)
    if found is None:
        raise LookupError(f"{path.name} has no section {heading!r}")
    fenced = False
    offset = found.end()
    for line in text[found.end() :].splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{len(level)}}} ", line):
            return text[found.start() : offset]
        offset += len(line)
    return text[found.start() :]
