"""``serve_mcp``: a registry scope served over stdio, listed and called by an SDK client."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest

from toolray import AbortController, ToolBatchInput, ToolCall, ToolRegistry
from toolray.adapters.mcp import import_mcp_tools, serve_mcp

from ._mcp_client import SERVE_SERVER, open_session


def _texts(result: mcp_types.CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, mcp_types.TextContent)]


async def test_the_scope_view_is_listed(tmp_path: Path) -> None:
    async with open_session(SERVE_SERVER, tmp_path / "server.log") as session:
        listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    assert "secret" not in tools  # the agent scope's restriction applies
    assert set(tools) == {"add", "pair", "delete", "pixel", "wait", "wait_started", "abort_seen"}
    assert tools["add"].description == "The add tool"
    assert tools["add"].input_schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    }


async def test_calls_go_through_the_pipeline(tmp_path: Path) -> None:
    async with open_session(SERVE_SERVER, tmp_path / "server.log") as session:
        add = await session.call_tool("add", {"a": 2, "b": 3})
        pair = await session.call_tool("pair", {"a": 1, "b": 2})
        pixel = await session.call_tool("pixel", {})
        denied = await session.call_tool("delete", {})
        hidden = await session.call_tool("secret", {})
        invalid = await session.call_tool("add", {"a": "two"})
    assert (add.is_error, _texts(add), add.structured_content) == (False, ["5"], None)
    assert pair.structured_content == {"a": 1, "b": 2}
    assert pixel.content[1] == mcp_types.ImageContent(data="aGk=", mime_type="image/png")
    assert denied.is_error  # the registry's guard
    assert "deletes need a human" in _texts(denied)[0]
    assert hidden.is_error
    assert _texts(hidden) == ['Error: unknown tool "secret"']
    assert invalid.is_error
    assert _texts(invalid)[0].startswith("Error: invalid arguments")


async def test_a_client_cancellation_aborts_the_call(tmp_path: Path) -> None:
    async with open_session(SERVE_SERVER, tmp_path / "server.log") as session:
        waiting = asyncio.ensure_future(session.call_tool("wait", {}))
        assert _texts(await session.call_tool("wait_started", {})) == ["started"]
        waiting.cancel()  # the SDK sends notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await waiting
        reason = await session.call_tool("abort_seen", {})
    assert not reason.is_error
    assert _texts(reason) == ["the MCP client cancelled the call"]


async def test_served_tools_import_back_into_a_registry(tmp_path: Path) -> None:
    async with open_session(SERVE_SERVER, tmp_path / "server.log") as session:
        registry = ToolRegistry()
        for definition in await import_mcp_tools(session, prefix="remote"):
            registry.register(definition)
        batch = ToolBatchInput(
            [
                ToolCall("c1", "remote_add", '{"a": 4, "b": 5}'),
                ToolCall("c2", "remote_delete", "{}"),
            ],
            AbortController().signal,
        )
        result = await registry.execute_batch(batch)
    ok, denied = (item.result for item in result.results)
    assert ok.value == [{"type": "text", "text": "9"}]
    assert denied.is_error
    assert "deletes need a human" in denied.error.message


async def test_serve_mcp_refuses_a_running_loop() -> None:
    registry: Any = ToolRegistry()
    with pytest.raises(RuntimeError, match="serve_mcp_async"):
        serve_mcp(registry)
