"""The fault-class table of docs/faults.md is the code's ``toolray.FAULT_CLASSES``."""

from __future__ import annotations

import re

from tests.docs._snippets import DOCS
from toolray import FAULT_CLASSES


def _table() -> list[tuple[str, str]]:
    page = (DOCS / "faults.md").read_text(encoding="utf-8")
    start, end = "<!-- fault-classes:start -->", "<!-- fault-classes:end -->"
    assert start in page, "the table's start marker is gone"
    assert end in page, "the table's end marker is gone"
    block = page.split(start, 1)[1].split(end, 1)[0]
    return re.findall(r"^\| `([A-Z_]+)` \| `(\w+)` \|$", block, re.M)


def test_the_docs_table_lists_every_code_with_its_class_in_the_code_s_order() -> None:
    rows = _table()
    assert rows, "no rows found"
    assert rows == list(FAULT_CLASSES.items())


def test_the_page_is_in_the_site_nav() -> None:
    nav = (DOCS.parent / "mkdocs.yml").read_text(encoding="utf-8")
    assert "faults.md" in nav
