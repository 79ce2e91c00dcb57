"""The snippets of README's "Use with OpenAI / Anthropic / MCP" run as written and print
what they claim.

Python blocks run in order in one namespace (as a reader pastes them into one session); a
block whose first line is ``# <name>.py`` is written to that file instead, for the blocks
that start it as a process. A block's trailing ``# …`` comment lines are its expected output
(compared without whitespace, since long reprs are wrapped in the text).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "README.md"
SECTION = "## Use with OpenAI / Anthropic / MCP"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end != -1 else len(text)]


FILE_HEADER = re.compile(r"# (\w+\.py)$")


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", _section(), re.DOTALL)


def _expected(block: str) -> str:
    lines = block.rstrip("\n").splitlines()
    tail: list[str] = []
    while lines and lines[-1].startswith("# "):
        tail.insert(0, lines.pop()[2:])
    return "".join("".join(tail).split())


def test_the_doc_has_the_sections_and_snippets() -> None:
    assert _section().startswith(SECTION)
    assert len(_blocks()) >= 7


def test_every_snippet_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for index, block in enumerate(_blocks()):
        first = block.splitlines()[0]
        header = FILE_HEADER.match(first)
        if header:
            (tmp_path / header.group(1)).write_text(block, encoding="utf-8")
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, f"{DOC.name}[{index}]", "exec"), namespace)
        assert "".join(out.getvalue().split()) == _expected(block), f"snippet {index}"
