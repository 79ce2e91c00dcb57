"""docs/isolation.md: its blocks (run by ``test_docs_blocks``) and its measured table."""

from __future__ import annotations

from tests.docs._snippets import DOCS, groups

DOC = DOCS / "isolation.md"


def test_the_page_has_a_configuration_block_and_a_crash_on_ray() -> None:
    found = groups(DOC)
    assert len(found) == 2
    assert "RayRuntime" not in found[0].blocks[0].source  # configuration only, no cluster
    assert "RayRuntime" in found[1].blocks[0].source  # the crash runs on the session's Ray


def test_the_measured_figures_live_in_the_one_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "(benchmarks.md)" in text
    assert "RESULTS-rollout.md" in text
    table = (DOCS.parent / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    for row in ('isolation "call": toolray / raw Ray', 'isolation "shared": good calls failed'):
        assert row in table
