"""The docs site builds strictly, its generated pages are current, and what ships is true."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._scripts import load_script
from tests.docs._snippets import DOCS, ROOT, pages
from tests.docs.conftest import Build

FORBIDDEN = (
    "API-v2", "API-v3", "API.md", "RAY-NOTES", "BEHAVIOUR-", "DESIGN.md", "shared/spec",
    "dsh-tools", "the original", "ISOLATION-NOTES", "STYLE.md",
)  # fmt: skip


def _module(path: Path) -> Any:
    return load_script(path, f"_docs_{path.stem}")


GEN = _module(ROOT / "scripts" / "gen_docs.py")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_mkdocs_build_strict_passes_from_elsewhere_without_a_warning(built_site: Build) -> None:
    """The real build, its whole output read: any warning fails (so would ``--strict``)."""
    assert built_site.returncode == 0, built_site.output[-5000:]
    noise = [
        line
        for line in built_site.output.splitlines()
        if re.match(r"^(WARNING|ERROR)\b", line) or "Traceback" in line or "not included" in line
    ]
    assert noise == [], built_site.output[-5000:]
    assert "Documentation built in" in built_site.output
    site = built_site.site
    assert (site / "how-a-batch-runs" / "index.html").is_file()
    benchmarks = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert "toolray / raw Ray throughput" in benchmarks  # the one table, included
    assert (site / "assets" / "benchmarks.svg").is_file()  # its chart, drawn at the build
    architecture = (site / "architecture" / "index.html").read_text(encoding="utf-8")
    assert "Core modules" in architecture  # ARCHITECTURE.md, included
    assert 'href="../reference/behaviour/"' in architecture  # its link made the site's


def test_a_warning_fails_the_strict_build(tmp_path: Path) -> None:
    """The build test can fail: a page linking a missing page stops a strict build."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\n[gone](gone.md)\n", encoding="utf-8")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: t\nstrict: true\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-f", str(config), "-d", str(tmp_path / "s")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 1
    assert "WARNING -  Doc file 'index.md' contains a link 'gone.md'" in proc.stderr


@pytest.mark.parametrize("name", sorted(GEN.PAGES))
def test_generated_pages_are_current(name: str) -> None:
    """Run ``.venv/bin/python scripts/gen_docs.py`` after changing the config or the CLI."""
    assert (DOCS / name).read_text(encoding="utf-8") == GEN.PAGES[name](), name


def _models(model: Any, path: str = "") -> list[tuple[str, Any]]:
    out = [(path, model)]
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
            out += _models(annotation, f"{path}{name}.")
    return out


def test_every_configuration_key_is_described_in_the_reference() -> None:
    from toolray_actors import RuntimeConfig

    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    keys = 0
    for path, model in _models(RuntimeConfig):
        for name, field in model.model_fields.items():
            assert field.description, f"{path}{name} has no Field(description=...)"
            assert f"| `{name}` |" in page
            keys += 1
    assert keys >= 35


def test_the_benchmark_table_is_composed_from_the_latest_results() -> None:
    run_all = _module(ROOT / "benchmarks" / "run_all.py")
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert text == run_all.compose(), "run: python benchmarks/run_all.py --compose"
    assert "not measured" not in text


def test_every_detailed_result_file_is_written_by_a_script_run_all_runs() -> None:
    """``run_all.py`` re-measures every headline: no detailed file is kept by hand."""
    run_all = _module(ROOT / "benchmarks" / "run_all.py")
    scripts = [*run_all.SCRIPTS, *run_all.QUICK]
    written = {
        source
        for script in scripts
        for source in re.findall(r"RESULTS-\w+\.md", (ROOT / "benchmarks" / script).read_text())
    }
    written |= {Path(a).name for args in run_all.ARGS.values() for a in args if "RESULTS-" in a}
    assert {h.source for h in run_all.HEADLINES} <= written
    for script in scripts:  # each one is there, and runs as its own program
        assert '__name__ == "__main__"' in (ROOT / "benchmarks" / script).read_text(), script


def test_figures_are_quoted_only_from_the_one_table() -> None:
    """No page restates a throughput ratio: the Benchmarks page is the one place."""
    for page in pages():
        text = page.read_text(encoding="utf-8")
        assert not re.search(r"\d\.\d+ ?× (raw Ray|the throughput)", text), page.name


def test_the_readme_fits_on_a_few_screens_and_links_every_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    for page in ("getting-started", "how-a-batch-runs", "farm-runtime", "code-mode", "scale"):
        assert f"(docs/{page}.md)" in readme
    for page in ("examples", "glossary", "benchmarks"):
        assert f"(docs/{page}.md)" in readme
    assert "./scripts/test" in readme


def _bash_blocks(text: str) -> list[str]:
    return re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)


def test_the_readmes_first_command_works_in_a_fresh_clone_as_written() -> None:
    """The first command a reader meets is the clone's, not a package that is not published.

    ``./scripts/setup`` is what CI runs first (``scripts/test``), the demo is
    ``tests/packaging/test_wheel.py``'s (checked by ``tests/_demo.py``), the docs build and
    the browser are this folder's tests, and the chart command is
    ``test_benchmarks_chart.py``'s.
    """
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first, second = _bash_blocks(readme)[:2]
    assert first.split("#")[0].strip() == "./scripts/setup && .venv/bin/toolray demo"
    assert readme.index(first) < readme.index("pip install")  # nothing to pip install first
    setup = ROOT / "scripts" / "setup"
    assert setup.stat().st_mode & 0o111  # executable, as the command runs it
    assert 'toolray = "toolray_actors.cli:main"' in (ROOT / "pyproject.toml").read_text()
    commands = [line.split("#")[0].strip() for line in second.splitlines()]
    assert commands == [
        ".venv/bin/mkdocs serve",
        ".venv/bin/python benchmarks/run_all.py --compose --chart benchmarks/out/results.svg",
        "./scripts/test",
    ]
    published = " ".join(readme[readme.index("Into an environment of your own") :].split())
    for needed in ('pip install ".[ray]"', ".venv/bin/python -m build --wheel", "PyPI"):
        assert needed in published, needed
    assert 'pip install "toolray[ray]"' in published  # said as what comes once published
    for page in ("getting-started.md", "index.md"):  # the docs start the same way
        text = (DOCS / page).read_text(encoding="utf-8")
        assert _bash_blocks(text)[0].split("#")[0].strip() == first.split("#")[0].strip()


def test_the_home_page_shows_what_its_quickstart_prints() -> None:
    from tests.docs._snippets import blocks, expected_output

    home = (DOCS / "index.md").read_text(encoding="utf-8")
    (program,) = blocks(DOCS / "index.md")  # it runs, printing this, in test_docs_blocks
    (shown,) = re.findall(r"^It prints:\n\n```text\n(.*?)^```", home, re.S | re.M)
    assert " ".join(expected_output(program.source)) == " ".join(shown.splitlines())


def test_every_nav_page_exists_and_every_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\s*- [^:]+: ([\w/-]+\.md)$", nav, re.M))
    assert listed == {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}


@pytest.mark.parametrize(
    "path",
    [
        ROOT / "README.md",
        ROOT / "ARCHITECTURE.md",
        ROOT / "mkdocs.yml",
        *sorted(DOCS.rglob("*.md")),
        *sorted((ROOT / "configs").glob("*.toml")),
        *sorted((ROOT / "actors" / "toolray_actors" / "configs").glob("*.toml")),
        ROOT / "examples" / "notebook.ipynb",
    ],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_shipped_text_names_no_document_that_does_not_ship(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert [word for word in FORBIDDEN if word in text] == []


def test_how_a_batch_runs_explains_the_schedule() -> None:
    page = (DOCS / "how-a-batch-runs.md").read_text(encoding="utf-8")
    for needed in (
        "exclusive unless marked concurrency-safe",
        "is_concurrency_safe",
        "**`max_parallel_tool_calls`** calls run at once (default\n**10**",
        "parallel group",
        "barrier",
        "committed",
        "stream_batch",
        "```text\nmodel order:",  # the picture of groups and barriers
    ):
        assert needed in page, needed
    from toolray import BatchExecutor, ToolRegistry
    from toolray_actors import RuntimeConfig

    assert BatchExecutor(ToolRegistry()).max_parallel_tool_calls == 10
    assert RuntimeConfig().max_parallel_tool_calls == 10
