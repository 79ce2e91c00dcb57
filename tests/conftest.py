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
