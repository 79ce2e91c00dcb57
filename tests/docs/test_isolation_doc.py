"""docs/isolation.md: every Python block runs on its own, and prints what it says it prints."""

from __future__ import annotations

from typing import Any

import pytest

from tests.docs._snippets import ROOT, expected_output, run_inline, snippets

DOC = ROOT / "docs" / "isolation.md"
ALL = snippets(DOC)


def test_the_page_has_its_snippets() -> None:
    assert [s.kind for s in ALL] == ["ray", "ray"]  # both name toolray_actors
    assert "ROLLOUT-TABLE" not in DOC.read_text(encoding="utf-8")  # the figures are in


def test_the_configuration_snippet_runs_without_ray() -> None:
    first = ALL[0]
    assert "RayRuntime" not in first.source
    assert run_inline(first.source) == expected_output(first.source)


@pytest.mark.ray
def test_the_crash_snippet_fails_only_its_own_call(ray_runtime: Any) -> None:
    second = ALL[1]
    assert run_inline(second.source) == expected_output(second.source)
