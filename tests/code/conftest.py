"""Fixtures for the Code Mode runtime tests: a fresh runtime per test, no process left behind."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.code._helpers import child_pids
from toolray.code import PythonRuntime


@pytest.fixture
def runtime() -> Iterator[PythonRuntime]:
    """A runtime with one warm child; afterwards every child it started must be gone."""
    before = child_pids()
    rt = PythonRuntime(timeout_s=30)
    yield rt
    rt.close()
    assert child_pids() - before == set()
