"""Fixtures of the core suite: the registry and the pipeline ``Probe`` most tests start with."""

from __future__ import annotations

import pytest

from toolray import ToolRegistry

from ._pipeline_helpers import Probe


@pytest.fixture
def reg() -> ToolRegistry:
    """A fresh in-process registry (native mode, system clock)."""
    return ToolRegistry()


@pytest.fixture
def probe(reg: ToolRegistry) -> Probe:
    """Recording listeners on every stage of ``reg`` (see ``_pipeline_helpers.Probe``)."""
    return Probe(reg)
