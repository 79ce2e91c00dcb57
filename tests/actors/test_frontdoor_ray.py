"""The Ray API edges: a scope-less batch on an executor handle, no signal, sync in a loop."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.tools import text_echo_tool
from toolray import ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray


def test_a_scope_less_batch_runs_in_the_handles_scope(rt: Any, scope_key: str) -> None:
    """No need to say the scope twice: the handle's scope is the batch's."""
    rt.owned.append(rt.registry.register(text_echo_tool("fd_echo")))
    restricted = f"{scope_key}-hidden"
    rt.owned.append(rt.scope(restricted).restrict(deny=["fd_echo"]))
    calls = [ToolCall("c1", "fd_echo", {"text": "x"})]
    out = rt.executor(scope_key).execute_batch_sync(ToolBatchInput(calls))
    assert out.results[0].result.value["text"] == "x"
    hidden = rt.executor(restricted).execute_batch_sync(ToolBatchInput(calls))
    assert hidden.results[0].result.error.info.code == "UNKNOWN_TOOL"  # ran in that scope


def test_a_batch_for_another_scope_is_still_refused(rt: Any, scope_key: str) -> None:
    batch = ToolBatchInput([ToolCall("c1", "fd_echo", "{}")], scope="someone-else")
    with pytest.raises(ValueError, match="batch scope 'someone-else' is not this executor's"):
        rt.executor(scope_key).execute_batch_sync(batch)


async def test_the_blocking_handle_api_inside_a_running_loop_without_a_signal(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("fd_loop")))
    asyncio.get_running_loop()  # as in a notebook cell
    out = rt.executor(scope_key).execute_batch_sync(
        ToolBatchInput([ToolCall("c1", "fd_loop", {"text": "nb"})])
    )
    assert out.results[0].result.value["text"] == "nb"
    streamed = [
        index
        async for index, _ in rt.executor(scope_key).stream_batch(
            ToolBatchInput([ToolCall("a", "fd_loop", {"text": "1"})] * 1)
        )
    ]
    assert streamed == [0]


def test_every_error_of_the_ray_layer_is_a_toolray_error() -> None:
    import toolray_actors
    from toolray.errors import HarnessError, ToolrayError

    for name in ("ConfigError", "StartError", "RuntimeUnavailableError", "RayMissingError"):
        assert issubclass(getattr(toolray_actors, name), ToolrayError), name
    assert issubclass(toolray_actors.RuntimeUnavailableError, HarnessError)
    assert issubclass(toolray_actors.ConfigError, ValueError)
    assert issubclass(toolray_actors.RayMissingError, ImportError)
