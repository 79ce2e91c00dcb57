"""docs/code-mode-security.md: every Python block runs on its own, and says what it claims."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from tests.docs._snippets import expected_output

DOC = Path(__file__).resolve().parents[2] / "docs" / "code-mode-security.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_names_code_mode_in_full() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.startswith("# Code Mode security\n")
    assert "programmatic tool calling" in text
    assert len(BLOCKS) == 3


@pytest.mark.parametrize("source", BLOCKS, ids=[f"block-{i}" for i in range(len(BLOCKS))])
def test_a_block_runs_on_its_own_and_prints_what_the_page_says(source: str) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(source, DOC.name, "exec"), {"__name__": "__main__"})
    assert printed.getvalue().splitlines() == expected_output(source)
