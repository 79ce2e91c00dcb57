"""An environment instance's process is a body's process: what it sends is data too.

With ``isolation="call"`` an instance lives in a process of its own, and its tools' bodies
run there. The same smuggled objects as the tenant red team's (a *reviver*: an object whose
unpickling runs code) are raised, dispatched, deferred and returned by tools of an
environment: every call gets one result, the failure says what the body raised, the
reviver runs in no worker, executor or driver — and the instance lives on, its state intact.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import cloudpickle
import psutil
import pytest

from tests import envs
from tests.actors import _tenant_tools
from tests.actors._tenant_tools import hostile_tools, marker_lines
from toolray import ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(_tenant_tools)
cloudpickle.register_pickle_by_value(envs)


@pytest.fixture
def env_ex(rt: Any, scope_key: str) -> Any:
    """A scope with the counter environment, its ``incr``, and the hostile tools as its tools."""
    scope = rt.registry.scope(scope_key)
    rt.owned.append(scope.register_environment(envs.counter_env()))
    rt.owned.append(scope.register(envs.incr))
    rt.owned.append(scope.register(envs.spawn))
    rt.owned.append(scope.register(envs.crash))
    for tool in hostile_tools(environment="counter"):
        rt.owned.append(scope.register(tool))
    ex = rt.executor(scope_key)
    ex.environment("counter").open_sync({"start": 5})
    return ex


def _one(ex: Any, name: str, args: dict[str, Any]) -> Any:
    (result,) = ex.execute_batch_sync(ToolBatchInput([ToolCall("c1", name, args)])).results
    return result.result


@pytest.mark.parametrize(
    "tool",
    [
        "hostile_raise",
        "hostile_raise_coded",
        "hostile_dispatch",
        "hostile_defer",
        "hostile_defer_forged",
        "hostile_value",
    ],
)
def test_what_an_instance_sends_is_data(env_ex: Any, tmp_path: Path, tool: str) -> None:
    marker = tmp_path / tool
    result = _one(env_ex, tool, {"marker": str(marker)})
    if tool == "hostile_raise":
        assert result.error.message == "a hostile error"
    elif tool == "hostile_raise_coded":
        assert (result.error.info.name, result.error.info.code) == ("HostileError", "HOSTILE")
    elif tool == "hostile_dispatch":
        assert all(seen.startswith(("failed: ", "raised: ")) for seen in result.value), result
    else:
        assert result.is_error
        assert "cannot" in result.error.message or "lossless JSON" in result.error.message
    assert marker_lines(marker) == []
    # the instance serves on, its state as it was
    assert _one(env_ex, "incr", {"by": 1}).value == 6
    assert env_ex.environment("counter").status_sync().state == "open"


def test_what_an_instance_starts_lives_with_it_and_ends_with_it(env_ex: Any) -> None:
    helper = _one(env_ex, "spawn", {}).value
    daemon = _one(env_ex, "spawn", {"daemon": True}).value
    # both stay while their instance lives (a shell session is state), a daemon that left
    # the instance's group and session too: the instance's process is their subreaper
    assert _one(env_ex, "incr", {"by": 1}).value == 6
    assert _alive(helper)
    assert _alive(daemon)
    assert psutil.Process(daemon).ppid() == env_ex.environment("counter").status_sync().pid
    env_ex.environment("counter").close_sync()
    _wait_gone(helper, "the helper's end with its instance")
    _wait_gone(daemon, "the daemon's end with its instance")


def test_what_a_killed_instance_started_dies_with_it(env_ex: Any) -> None:
    daemon = _one(env_ex, "spawn", {"daemon": True}).value
    assert _one(env_ex, "crash", {}).error.info.code == "ENVIRONMENT_LOST"
    _wait_gone(daemon, "the daemon's end with its killed instance")


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pid: int, what: str) -> None:
    deadline = time.monotonic() + 60
    while _alive(pid):
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)
