"""Start making the wheel and its venvs as soon as a wheel test is selected (``_wheels``)."""

from __future__ import annotations

import pytest

from tests.packaging import _wheels


def pytest_collection_finish(session: pytest.Session) -> None:
    if any(item.path.name == "test_wheel.py" for item in session.items):
        _wheels.start()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _wheels.stop()
