"""``docs/integrations.md``: every Python block runs on its own and prints what it says.

A block's expected output is written where the reader sees it (a comment on its
``print(...)`` line, or the comment line after it). Blocks that use ``toolray_actors`` run
against the session cluster (``RayRuntime.start`` attaches to the Ray this process runs).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.docs._snippets import ROOT, blocks, expected_output, run_inline

PAGE = ROOT / "docs" / "integrations.md"
ALL = blocks(PAGE)
CORE = [b for b in ALL if not b.needs_ray]
RAY = [b for b in ALL if b.needs_ray]


def test_the_page_has_a_block_per_framework_and_one_on_ray() -> None:
    sources = [s.source for s in ALL]
    for module in ("pydantic_ai", "langgraph", "openai_agents"):
        assert any(f"toolray.integrations.{module} import" in s for s in sources), module
    assert len(RAY) == 1
    text = PAGE.read_text(encoding="utf-8")
    assert text.startswith("# Use with Pydantic AI / LangGraph / OpenAI Agents SDK\n")
    assert "<!-- continuation -->" not in text  # every block stands alone
    assert "Code Mode" in text
    assert "programmatic tool calling" in text


@pytest.mark.parametrize("snippet", CORE, ids=lambda s: s.where)
def test_block_runs_as_written(snippet: Any) -> None:
    expected = expected_output(snippet.source)
    assert expected  # every block shows what it prints
    assert run_inline(snippet.source) == expected


@pytest.mark.ray
@pytest.mark.parametrize("snippet", RAY, ids=lambda s: s.where)
def test_ray_block_runs_as_written(snippet: Any, ray_runtime: Any) -> None:
    assert run_inline(snippet.source) == expected_output(snippet.source)
