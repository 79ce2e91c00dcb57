"""The docs site, built once per session by the real ``mkdocs build --strict``.

The build runs in a directory outside the repository (``-f`` names the config), as a reader
who is not at the repository's root runs it; its whole output is kept, so a test can fail
on any warning (``-q`` would hide them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs._snippets import ROOT


@dataclass(frozen=True, slots=True)
class Build:
    """One run of ``mkdocs build --strict``."""

    returncode: int
    output: str
    site: Path
    seconds: float


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Build:
    out = tmp_path_factory.mktemp("docs-build")
    elsewhere = out / "not-the-repository"
    elsewhere.mkdir()
    argv = [sys.executable, "-m", "mkdocs", "build", "--strict"]
    argv += ["-f", str(ROOT / "mkdocs.yml"), "-d", str(out / "site")]
    started = time.perf_counter()
    proc = subprocess.run(
        argv,
        cwd=elsewhere,
        capture_output=True,
        text=True,
        timeout=170,
        check=False,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # the theme's banner, not the build's
    )
    seconds = time.perf_counter() - started
    return Build(proc.returncode, proc.stdout + proc.stderr, out / "site", seconds)
