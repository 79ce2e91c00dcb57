"""Every page of the built docs site, opened in headless Chromium as a reader opens it.

A page fails on a console error (a resource that did not load — the site loads nothing
from elsewhere —, an uncaught exception), an image that did not load, a diagram that did
not draw (no ``<svg>``, an empty one, or mermaid's error picture), a second title, a code
line cut off behind a scroll bar, an identifier of a table broken across lines, or a link
to a page or a heading the site does not have. The last test shows each of those checks
failing on a page made broken on purpose.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.docs._browser import PageReport, chromium, ids_of, read_page, serve
from tests.docs.conftest import Build

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DIAGRAMS = {"architecture/": 1, "how-a-batch-runs/": 1, "isolation/": 2}
"""Pages with diagrams: the architecture, a batch's life, the cancellation ladder and the
isolation levels."""


def _pages(site: Path) -> list[str]:
    """Every page of the site, as its path from the root ("" is the home page)."""
    found = (p.relative_to(site).parent.as_posix() for p in site.rglob("index.html"))
    return sorted("" if path == "." else f"{path}/" for path in found)


def _html(site: Path, path: str) -> str:
    return (site / path / "index.html").read_text(encoding="utf-8")


def problems(report: PageReport, site: Path, base: str) -> list[str]:
    """What is wrong with a page, one line per problem."""
    where = report.path or "(home)"
    out = [f"{where}: console error: {e}" for e in report.errors]
    out += [f"{where}: image not loaded: {src}" for src in report.broken_images]
    out += [f"{where}: diagram {i + 1} not drawn" for i, n in enumerate(report.diagrams) if n < 5]
    if report.headings != 1:
        out.append(f"{where}: {report.headings} titles (h1), not 1")
    out += [f"{where}: code line cut off: {c!r}" for c in report.clipped_code]
    out += [f"{where}: identifier broken across lines: {c}" for c in report.broken_identifiers]
    out += [f"{where}: broken link: {link}" for link in report.links if _broken(link, site, base)]
    return out


def _broken(link: str, site: Path, base: str) -> bool:
    """Whether a link of the site points at a page, file or heading the site does not have."""
    if not link.startswith(base):
        return False  # another site: not fetched here (the tests reach no network)
    parts = urlsplit(link)
    target = site / parts.path.lstrip("/")
    page = target / "index.html" if parts.path.endswith("/") else target
    if not page.is_file():
        return True
    if parts.fragment and page.suffix == ".html":
        return parts.fragment not in ids_of(page.read_text(encoding="utf-8"))
    return False


def test_every_page_reads_cleanly_in_chromium(built_site: Build) -> None:
    assert built_site.returncode == 0, built_site.output[-3000:]
    site = built_site.site
    pages = _pages(site)
    assert len(pages) >= 20
    found: list[str] = []
    drawn: dict[str, int] = {}
    started = time.perf_counter()
    with serve(site) as base, chromium() as driver:
        for path in pages:
            report = read_page(driver, base, path, _html(site, path))
            found += problems(report, site, base)
            if report.diagrams:
                drawn[path] = len(report.diagrams)
    print(f"{len(pages)} pages read in Chromium in {time.perf_counter() - started:.1f} s")
    assert found == []
    assert {page: drawn.get(page, 0) for page in DIAGRAMS} == DIAGRAMS


def test_the_benchmarks_page_shows_its_chart_and_the_home_page_its_quickstart(
    built_site: Build,
) -> None:
    benchmarks = _html(built_site.site, "benchmarks/")
    assert '<img alt="' in benchmarks
    assert 'src="../assets/benchmarks.svg"' in benchmarks
    chart = (built_site.site / "assets" / "benchmarks.svg").read_text(encoding="utf-8")
    assert "targets met" in chart
    assert "MISSED" in chart  # the rows that miss their target are marked in the chart too
    home = _html(built_site.site, "")
    for needed in ("Quickstart", "observability", "isolation", "security", "integrations"):
        assert needed.lower() in home.lower(), needed


def test_each_check_fails_on_a_page_broken_on_purpose(built_site: Build, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(built_site.site, site)
    page = site / "broken" / "index.html"
    page.parent.mkdir()
    html = _html(site, "glossary/")
    faults = (
        '<h1>A second title</h1><img src="missing.png" alt="gone">'
        '<pre class="mermaid">flowchart LR\n  A --> </pre>'
        '<p><a href="../nowhere/">gone</a> <a href="../architecture/#no-such-heading">gone</a></p>'
        '<pre><code style="white-space:pre;overflow-wrap:normal">' + "x" * 400 + "</code></pre>"
        '<table><tr><td style="width:2em"><code style="white-space:normal;word-break:break-all">'
        "pid_namespace_and_more</code></td></tr></table>"
        '<script>console.error("boom")</script>'
    )
    page.write_text(html.replace("</article>", faults + "</article>", 1), encoding="utf-8")
    with serve(site) as base, chromium() as driver:
        html = page.read_text(encoding="utf-8")
        report = read_page(driver, base, "broken/", html, diagram_timeout_s=3)
        found = problems(report, site, base)
    kinds = [line.split(": ", 2)[1] for line in found]
    for kind in (
        "console error",  # console.error("boom") and missing.png's 404
        "image not loaded",
        "diagram 1 not drawn",
        "2 titles (h1), not 1",
        "code line cut off",
        "identifier broken across lines",
        "broken link",
    ):
        assert kind in kinds, (kind, found)
    assert any("nowhere" in line for line in found)
    assert any("no-such-heading" in line for line in found)
