"""docs/isolation.md: its blocks (run by ``test_docs_blocks``) and its measured table."""

from __future__ import annotations

from tests.docs._snippets import DOCS, groups

DOC = DOCS / "isolation.md"


def test_the_page_has_a_configuration_block_and_a_crash_on_ray() -> None:
    found = groups(DOC)
    assert len(found) == 2
    assert "RayRuntime" not in found[0].blocks[0].source  # configuration only, no cluster
    assert "RayRuntime" in found[1].blocks[0].source  # the crash runs on the session's Ray


def test_the_rollout_table_holds_figures() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "ROLLOUT-TABLE" not in text  # the placeholder was replaced by a measured table
    assert "| call |" in text  # no-op throughput, both modes
    assert "| shared |" in text
