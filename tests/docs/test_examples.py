"""The examples a reader meets: each says what it needs, and says it in one line when missing.

Each example's first lines name the extras it needs; run without one of them (its package
made unimportable, as if it were not installed), it exits with one line naming the extra —
no traceback — and with ``--ray`` but no Ray, one line naming ``toolray[ray]``. The docs'
Examples page lists every example, and the wheel ships them (as data, beside the packages).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs._snippets import DOCS, ROOT

EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(EXAMPLES.rglob("*.py"))
NEEDS = {
    "agent_loop.py": ("openai", "toolray[openai,anthropic]"),
    "pydantic_ai_weather.py": ("pydantic_ai", "toolray[integrations]"),
    "langgraph_weather.py": ("langgraph", "toolray[integrations]"),
    "openai_agents_weather.py": ("agents", "toolray[integrations]"),
}
"""Each example: a package it cannot run without, and the extra that brings it."""

BLOCKED = """
import runpy, sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None  # as if it were not installed: importing it fails
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _run_without(packages: str, script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKED, packages, str(script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    (line,) = proc.stderr.strip().splitlines()
    return line


def test_every_example_is_known_here() -> None:
    assert sorted(p.name for p in SCRIPTS) == sorted(NEEDS)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_each_example_names_its_extras_in_its_first_lines(script: Path) -> None:
    docstring = ast.get_docstring(ast.parse(script.read_text(encoding="utf-8"))) or ""
    opening = " ".join(docstring.splitlines()[:5])
    assert f'pip install "{NEEDS[script.name][1]}"' in opening.replace('``"', '"')
    assert "``ray`` extra" in opening  # for --ray


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_without_its_extra_an_example_says_which_in_one_line(script: Path) -> None:
    package, extra = NEEDS[script.name]
    line = _one_line(_run_without(package, script))
    assert line.startswith(f"{script.name} needs the ")
    assert f"({package} is not installed)" in line
    assert line.endswith(f'pip install "{extra}"')


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_with_ray_but_no_ray_an_example_says_which_extra_in_one_line(script: Path) -> None:
    line = _one_line(_run_without("ray", script, "--ray"))
    assert line.startswith(f"{script.name}: this needs Ray, which is not installed")
    assert line.endswith('pip install "toolray[ray]"')


def test_the_notebook_names_its_extra_in_its_first_cell() -> None:
    notebook = json.loads((EXAMPLES / "notebook.ipynb").read_text(encoding="utf-8"))
    assert 'pip install "toolray[ray]"' in "".join(notebook["cells"][0]["source"])


def test_the_docs_examples_page_lists_every_example_with_its_command() -> None:
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    for path in [*SCRIPTS, EXAMPLES / "notebook.ipynb"]:
        relative = path.relative_to(ROOT).as_posix()
        assert f"`{relative}`" in page, relative
    for script in SCRIPTS:
        assert f"python {script.relative_to(ROOT).as_posix()}" in page
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "(examples.md)" in index
