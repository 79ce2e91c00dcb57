"""Every Python block of the README and of every page under docs/ runs as written.

Pages are discovered, not listed: a page merged later is tested too. See
``tests/docs/_snippets.py`` for the rules (continuations, file blocks, expected output).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.docs._snippets import Group, blocks, expected_output, groups, pages, run_group

ALL = [g for page in pages() for g in groups(page)]


def test_the_docs_have_blocks_of_every_kind() -> None:
    assert len(pages()) >= 12
    assert any(g.needs_ray for g in ALL)
    assert any(len(g.blocks) > 1 for g in ALL)  # continuations
    assert any(b.file_name for g in ALL for b in g.blocks)


def test_the_continuation_rule(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nx = 1\nprint(x)  # 1\n```\n\ntext\n\n<!-- continuation -->\n"
        "```python\nprint(x + 1)\n# 2\n```\n\n```python\nprint(3)\n```\n"
    )
    found = groups(page)
    assert [len(g.blocks) for g in found] == [2, 1]
    assert [b.continues for b in blocks(page)] == [False, True, False]
    assert expected_output(found[0].blocks[1].source) == ["2"]
    run_group(found[0], tmp_path)
    wrong = tmp_path / "wrong.md"
    wrong.write_text("```python\nprint(1)  # 2\n```\n")
    with pytest.raises(AssertionError, match="expected '2'"):
        run_group(groups(wrong)[0], tmp_path)


@pytest.mark.parametrize("group", [g for g in ALL if not g.needs_ray], ids=lambda g: g.id)
def test_block_runs_as_written(
    group: Group, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    run_group(group, tmp_path)


@pytest.mark.ray
@pytest.mark.timeout(240)
@pytest.mark.parametrize("group", [g for g in ALL if g.needs_ray], ids=lambda g: g.id)
def test_ray_block_runs_as_written_on_the_session_ray(
    group: Group, ray_runtime: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RayRuntime.start()`` attaches to the Ray this test process already runs."""
    monkeypatch.chdir(tmp_path)
    run_group(group, tmp_path)
