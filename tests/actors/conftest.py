"""Fixtures for the Ray layer tests: every test gets its own scope and cleans up."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

_ids = itertools.count()


def _owning(runtime: Any) -> Iterator[Any]:
    owned: list[Any] = []
    runtime.owned = owned
    yield runtime
    for dispose in reversed(owned):
        dispose()
    owned.clear()


@pytest.fixture
def rt(ray_runtime: Any) -> Iterator[Any]:
    """The session runtime; registrations made through ``rt.owned`` are lifted afterwards."""
    yield from _owning(ray_runtime)


@pytest.fixture
def shared_rt(shared_runtime: Any) -> Iterator[Any]:
    """:func:`rt` on the session namespace whose pools run ``isolation = "shared"``."""
    yield from _owning(shared_runtime)


@pytest.fixture
def scope_key() -> str:
    """A scope key unique to this test."""
    return f"test-scope-{next(_ids)}"
