"""Fixtures of the integration tests: the session's Ray fixtures, and tools sent by value.

``rt`` and ``scope_key`` are the Ray layer's own fixtures (``tests/actors/conftest.py``):
the session runtime, whose registrations made through ``rt.owned`` are lifted after each
test, and a scope key unique to the test.
"""

from __future__ import annotations

from typing import Any

import cloudpickle
import pytest

from tests.actors.conftest import rt, scope_key
from tests.integrations import _tools

__all__ = ("by_value", "rt", "scope_key")


@pytest.fixture
def by_value(rt: Any) -> Any:
    """The session runtime, with this package's tool module pickled by value into actors."""
    cloudpickle.register_pickle_by_value(_tools)
    return rt
