"""mkdocs hooks of the docs site (``hooks:`` in ``mkdocs.yml``).

- The site's diagrams need mermaid's browser bundle in ``docs/assets/javascripts/``, which
  ``./scripts/setup`` fetches from the npm registry (it is not committed): without it the
  build stops with one line saying so, instead of a site whose diagrams stay empty.
- ``ARCHITECTURE.md`` is written for the repository and included in the site's Architecture
  page (where the page says ``--8<-- "ARCHITECTURE.md"``): without its title, which the page
  has already, and with its links into ``docs/`` made relative to the site.
- The Benchmarks page's chart, ``assets/benchmarks.svg``, is drawn at every build by the
  benchmarks' own ``run_all.chart`` from the measured figures (``benchmarks/RESULTS-*.md``),
  so it never lags the table beside it; it is not a file of the repository.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

MERMAID = Path("assets") / "javascripts" / "mermaid.min.js"
CHART = "assets/benchmarks.svg"
INCLUDE = '--8<-- "ARCHITECTURE.md"'
_INTO_DOCS = re.compile(r"\]\(docs/")


def _run_all(config: Any) -> Any:
    """``benchmarks/run_all.py``, imported from the repository the config belongs to."""
    path = Path(config["config_file_path"]).parent / "benchmarks" / "run_all.py"
    spec = importlib.util.spec_from_file_location("_toolray_run_all", path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def on_files(files: Files, config: Any) -> Files:
    """Add the benchmarks chart, drawn from the measured figures."""
    run_all = _run_all(config)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "benchmarks.svg"
        run_all.chart(run_all.rows(), path)
        files.append(File.generated(config, CHART, content=path.read_bytes()))
    return files


def on_config(config: Any) -> Any:
    """Stop a build that would ship empty diagrams."""
    if not (Path(config["docs_dir"]) / MERMAID).is_file():
        raise PluginError(
            f"docs/{MERMAID.as_posix()} is missing: run ./scripts/setup, which fetches "
            "mermaid from the npm registry (the site's diagrams render with it, offline)"
        )
    return config


def on_page_markdown(markdown: str, page: Any, config: Any, **_: Any) -> str:
    """Include ``ARCHITECTURE.md``: no second title, its links relative to the site."""
    if INCLUDE not in markdown:
        return markdown
    source = Path(config["config_file_path"]).parent / "ARCHITECTURE.md"
    text = source.read_text(encoding="utf-8")
    body = text.split("\n", 1)[1] if text.startswith("# ") else text
    return markdown.replace(INCLUDE, _INTO_DOCS.sub("](", body).strip("\n"))
