"""Shared test configuration: run ``async def`` tests on a fresh asyncio loop.

No plugin is needed: the hook below runs each coroutine test with ``asyncio.run``, so every
test gets its own loop and nothing leaks between tests.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    func = pyfuncitem.obj
    if not inspect.iscoroutinefunction(func):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(func(**kwargs))
    return True


@pytest.fixture(scope="session")
def ray_runtime() -> Any:
    """One Ray cluster for the whole session (small, no dashboard), shared by Ray tests."""
    import cloudpickle

    from tests import tools
    from toolray_actors import RayRuntime

    cloudpickle.register_pickle_by_value(tools)
    runtime = RayRuntime.start("configs/ci.toml", address="local")
    yield runtime
    runtime.shutdown()
