"""The API edges a new user meets first: an optional signal, and the blocking registry API."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests import tools
from toolray import (
    AbortController,
    AbortSignal,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
)


def _registry() -> ToolRegistry:
    registry = ToolRegistry()
    registry.register(tools.upper_tool("upper"))
    return registry


def test_a_batch_without_a_signal_gets_one_that_never_fires() -> None:
    batch = ToolBatchInput([ToolCall("c1", "upper", {"text": "a"})])
    assert isinstance(batch.signal, AbortSignal)
    assert batch.signal.aborted is False
    explicit = ToolBatchInput([ToolCall("c1", "upper", {"text": "a"})], None, scope="s")
    assert explicit.signal.aborted is False
    assert explicit.signal is not batch.signal  # one per batch, never shared
    out = asyncio.run(_registry().execute_batch(batch))
    assert out.results[0].result.value == "A"


def test_a_batch_signal_must_be_a_signal() -> None:
    with pytest.raises(TypeError, match="signal must be an AbortSignal, not AbortController"):
        ToolBatchInput([], AbortController())  # type: ignore[arg-type]


def test_execute_batch_sync_in_a_plain_script() -> None:
    calls = [ToolCall("c1", "upper", {"text": "a"}), ToolCall("c2", "nope", "{}")]
    out = _registry().execute_batch_sync(ToolBatchInput(calls))
    assert out.results[0].result.value == "A"
    assert out.results[1].result.error.info.code == "UNKNOWN_TOOL"


def test_execute_sync_in_a_plain_script() -> None:
    inp = ToolExecutionInput("c1", "upper", {"text": "b"}, AbortSignal())
    assert _registry().execute_sync(inp).value == "B"


async def test_the_blocking_api_inside_a_running_event_loop() -> None:
    """As in a notebook cell: the loop is running, the call blocks and does not re-enter it."""
    registry = _registry()
    loop_thread = threading.get_ident()
    seen: list[int] = []
    registry.on_execute(lambda execution, call: (seen.append(threading.get_ident()), call())[1])
    out = registry.execute_batch_sync(ToolBatchInput([ToolCall("c1", "upper", {"text": "c"})]))
    assert out.results[0].result.value == "C"
    inp = ToolExecutionInput("c2", "upper", {"text": "d"}, AbortSignal())
    assert registry.execute_sync(inp).value == "D"
    assert len(seen) == 2
    assert loop_thread not in seen  # ran on the helper thread's own loop
    await asyncio.sleep(0)  # this loop is still healthy


async def test_an_error_inside_the_blocking_api_reaches_the_caller_in_a_loop() -> None:
    registry = _registry()
    with pytest.raises(TypeError, match="execute_batch\\(\\) takes a ToolBatchInput, not str"):
        registry.execute_batch_sync("calls")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="execute\\(\\) takes a ToolExecutionInput, not dict"):
        registry.execute_sync({})  # type: ignore[arg-type]
