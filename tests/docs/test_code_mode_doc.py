"""The Code Mode page: the ``text`` blocks showing what the model reads are what the page's
programs really produce (the programs themselves run in ``test_docs_blocks.py``)."""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

from tests.docs._snippets import DOCS, blocks

DOC = DOCS / "code-mode.md"
ALL = blocks(DOC)


def _text_blocks() -> list[str]:
    return re.findall(r"^````text\n(.*?)\n````$", DOC.read_text(encoding="utf-8"), re.S | re.M)


def _namespace(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):  # the page's own code, to read its objects
        exec(compile(source, DOC.name, "exec"), namespace)
    return namespace


def test_the_page_has_its_programs_and_says_code_mode_in_full() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "Code Mode" in text
    assert "programmatic tool calling" in text
    assert len([b for b in ALL if not b.needs_ray]) >= 2
    assert len([b for b in ALL if b.needs_ray]) == 1
    assert len(_text_blocks()) == 3


def test_the_shown_output_and_prompt_sections_are_what_the_code_produces() -> None:
    first, second = (b for b in ALL if not b.needs_ray and "registry" in b.source)
    output, code_only, sdk = _text_blocks()
    result = _namespace(first.source)["results"][0].result
    assert result.content[0]["text"] == output
    sections = _namespace(second.source)["sections"]
    assert [s.text for s in sections] == [code_only, sdk]
