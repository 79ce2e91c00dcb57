"""Fixtures for the substrate tests: a template per test whose processes are all gone after."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from toolray.procs import Template, TemplateSpec

ENTRIES = Path(__file__).with_name("entries.py")


def descendants() -> set[int]:
    """Every process below this one (zombies included)."""
    return {proc.pid for proc in psutil.Process().children(recursive=True)}


@pytest.fixture
def make_template() -> Iterator[Callable[..., Template]]:
    """``make_template("echo", **spec)``: a template on an entry of ``entries.py``."""
    before = descendants()
    made: list[Template] = []

    def make(entry: str, **spec: object) -> Template:
        template = Template(TemplateSpec(entry=f"{ENTRIES}:{entry}", **spec))  # type: ignore[arg-type]
        made.append(template)
        return template

    yield make
    for template in made:
        template.stop()
    assert descendants() - before == set()
