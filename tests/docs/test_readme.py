"""Every Python snippet of README.md runs as written and prints what it says it prints.

Core snippets run here; Ray snippets run against the session cluster (``RayRuntime.start()``
uses the Ray this process already initialised); the farm driver runs as two processes
against a cluster of its own in ``tests/actors/test_multidriver.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.docs._snippets import ROOT, expected_output, run_inline, snippets

README = ROOT / "README.md"
ALL = snippets(README)


def test_the_readme_has_core_ray_and_farm_snippets() -> None:
    assert {s.kind for s in ALL} >= {"core", "ray", "farm"}


@pytest.mark.parametrize("snippet", [s for s in ALL if s.kind == "core"], ids=lambda s: s.id)
def test_core_snippet_runs_as_written(snippet: Any) -> None:
    assert run_inline(snippet.source) == expected_output(snippet.source)


@pytest.mark.ray
@pytest.mark.parametrize("snippet", [s for s in ALL if s.kind == "ray"], ids=lambda s: s.id)
def test_ray_snippet_runs_as_written(snippet: Any, ray_runtime: Any) -> None:
    assert run_inline(snippet.source) == expected_output(snippet.source)
