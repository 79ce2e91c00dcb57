"""Shared test configuration: run ``async def`` tests on a fresh asyncio loop.

No plugin is needed: the hook below runs each coroutine test with ``asyncio.run``, so every
test gets its own loop and nothing leaks between tests.

``scripts/test`` runs the suite as two pytest processes side by side: the Ray tests (marker
``ray``), in order, beside the session's one Ray cluster; and all the others. The Ray tests
that start a Ray of their own in subprocesses also carry ``own_ray``.

With ``TOOLRAY_TEST_TRAIL`` set (``scripts/test`` sets it), the session writes a trail there:
the session Ray's driver and directory, each test as it starts, and ``finished`` at the end.
A session that ends without the last line (Ray's driver exits at once, silently, when its
raylet or GCS is gone) is then explained by ``scripts/test``: which test was running, and
Ray's own logs.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from typing import Any

import pytest

_TRAIL = os.environ.get("TOOLRAY_TEST_TRAIL")


def _trail(line: str) -> None:
    if _TRAIL:
        with open(_TRAIL, "a") as trail:
            trail.write(line + "\n")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:  # an own_ray test runs where the session's Ray may not be
        if item.get_closest_marker("own_ray") and "ray_runtime" in getattr(
            item, "fixturenames", ()
        ):
            raise pytest.UsageError(f"{item.nodeid} is marked own_ray but uses the session's Ray")


def pytest_runtest_logstart(nodeid: str) -> None:
    _trail(f"test {nodeid}")


def pytest_sessionfinish(session: pytest.Session) -> None:
    _trail("finished")


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
    _trail(f"ray {os.getpid()} {_session_dir()}")
    yield runtime
    runtime.shutdown()


@pytest.fixture(scope="session")
def sharded_runtime(ray_runtime: Any) -> Any:
    """A second namespace on the session cluster whose executors are 2 shards.

    Same config as ``ray_runtime`` but ``[executors] mode = "sharded"``: it attaches to the
    Ray this process already runs, so it costs only its own actors.
    """
    from toolray_actors import RayRuntime, RuntimeConfig

    base = ray_runtime.config.model_dump()
    cfg = RuntimeConfig.model_validate(
        {
            **base,
            "namespace": f"{base['namespace']}-sharded",
            "executors": {"mode": "sharded", "shards": 2},
        }
    )
    runtime = RayRuntime.start(cfg)
    yield runtime
    runtime.shutdown()


@pytest.fixture(scope="session")
def shared_runtime(ray_runtime: Any) -> Any:
    """A third namespace on the session cluster whose pools run ``isolation = "shared"``.

    Bodies run in the worker actors themselves (the fastest path, and the one whose faults
    reach every call of a worker); the other runtimes use the default, ``"call"``.
    """
    from toolray_actors import RayRuntime, RuntimeConfig

    base = ray_runtime.config.model_dump()
    cfg = RuntimeConfig.model_validate(
        {
            **base,
            "namespace": f"{base['namespace']}-shared",
            "pool": {**base["pool"], "isolation": "shared"},
        }
    )
    runtime = RayRuntime.start(cfg)
    yield runtime
    runtime.shutdown()


def _session_dir() -> str:
    """The session Ray's directory (its logs are what explain a driver that exited)."""
    from ray._private import worker

    node = worker._global_node
    return node.get_session_dir_path() if node is not None else ""
