"""README's Code Mode section: every snippet runs as written.

The same rules as README.md (each snippet standalone, its ``print`` comments its output), and
the ``text`` blocks showing what the model reads are what the snippets really produce.
"""

from __future__ import annotations

import contextlib
import io
import re
from typing import Any

import pytest

from tests.docs._snippets import ROOT, expected_output, run_inline, section, snippets

DOC = ROOT / "README.md"
HEADING = "## Code Mode"
ALL = snippets(DOC, HEADING)


def _text_blocks() -> list[str]:
    return re.findall(r"^````text\n(.*?)\n````$", section(DOC, HEADING), re.S | re.M)


def _namespace(snippet: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "__main__"}
    with contextlib.redirect_stdout(io.StringIO()):  # the doc's own code, to read its objects
        exec(compile(snippet.source, DOC.name, "exec"), namespace)
    return namespace


def test_the_section_has_its_snippets() -> None:
    assert section(DOC, HEADING).startswith(HEADING)
    assert [s.kind for s in ALL].count("core") >= 2
    assert [s.kind for s in ALL].count("ray") == 1
    assert len(_text_blocks()) == 3


@pytest.mark.parametrize("snippet", [s for s in ALL if s.kind == "core"], ids=lambda s: s.id)
def test_core_snippet_runs_as_written(snippet: Any) -> None:
    assert run_inline(snippet.source) == expected_output(snippet.source)


def test_the_shown_output_and_prompt_sections_are_what_the_code_produces() -> None:
    first, second = (s for s in ALL if s.kind == "core" and "registry" in s.source)
    output, code_only, sdk = _text_blocks()
    result = _namespace(first)["results"][0].result
    assert result.content[0]["text"] == output
    sections = _namespace(second)["sections"]
    assert [s.text for s in sections] == [code_only, sdk]


@pytest.mark.ray
@pytest.mark.parametrize("snippet", [s for s in ALL if s.kind == "ray"], ids=lambda s: s.id)
def test_ray_snippet_runs_as_written(snippet: Any, ray_runtime: Any) -> None:
    assert run_inline(snippet.source) == expected_output(snippet.source)
