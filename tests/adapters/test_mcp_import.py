"""``import_mcp_tools`` against a real MCP server subprocess (the SDK's ``MCPServer``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp.types as mcp_types
import pytest

from toolray import (
    AbortController,
    Placement,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolRegistry,
)
from toolray.adapters.mcp import McpToolError, import_mcp_tools, mcp_tool_definitions

from ._mcp_client import IMPORT_SERVER, open_session


def _batch(*calls: tuple[str, str, str], signal: Any = None) -> ToolBatchInput:
    return ToolBatchInput([ToolCall(*call) for call in calls], signal or AbortController().signal)


async def _registry(session: Any, **options: Any) -> ToolRegistry:
    registry = ToolRegistry()
    for definition in await import_mcp_tools(session, **options):
        registry.register(definition)
    return registry


async def test_definitions_map_schemas_annotations_and_names(tmp_path: Path) -> None:
    async with open_session(IMPORT_SERVER, tmp_path / "server.log") as session:
        definitions = {d.name: d for d in await import_mcp_tools(session, prefix="srv")}
        only = await import_mcp_tools(session, include={"add"})
    names = [
        "add",
        "count",
        "picture",
        "explode",
        "rendezvous",
        "hang",
        "wait_started",
        "cancellations",
    ]
    assert sorted(definitions) == sorted(f"srv_{name}" for name in names)
    assert [d.name for d in only] == ["add"]
    add = definitions["srv_add"]
    assert add.description == "Add two integers."
    assert add.parameters["required"] == ["a", "b"]
    assert add.output.schema["properties"] == {"total": {"title": "Total", "type": "integer"}}
    # minimum/maximum cannot be checked by the subset: dropped, and told to the model
    n = definitions["srv_count"].parameters["properties"]["n"]
    assert n["type"] == "integer"
    assert n["description"] == "How many (maximum: 5; minimum: 1)"
    assert definitions["srv_count"].output.schema["type"] == "array"  # content blocks
    rendezvous = definitions["srv_rendezvous"].is_concurrency_safe
    assert rendezvous is not None
    assert rendezvous({}) is True  # readOnlyHint: safe whatever the arguments
    assert definitions["srv_add"].is_concurrency_safe is None  # not read-only: exclusive


async def test_a_batch_runs_structured_unstructured_image_and_error_tools(tmp_path: Path) -> None:
    async with open_session(IMPORT_SERVER, tmp_path / "server.log") as session:
        registry = await _registry(session)
        result = await registry.execute_batch(
            _batch(
                ("c1", "add", '{"a": 2, "b": 3}'),
                ("c2", "count", '{"n": 3}'),
                ("c3", "picture", "{}"),
                ("c4", "explode", '{"reason": "on purpose"}'),
                ("c5", "count", '{"n": 9}'),
                ("c6", "count", '{"n": "three"}'),
            )
        )
    add, count, picture, explode, too_many, bad_type = (r.result for r in result.results)
    assert add.value == {"total": 5}
    assert add.content == [{"type": "text", "text": '{"total": 5}'}]
    assert count.value == [{"type": "text", "text": "1 2 3"}]
    assert count.content == count.value
    assert picture.content == [
        {"type": "text", "text": "a pixel"},
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    ]
    assert explode.is_error
    assert explode.error.info.code == McpToolError.default_code
    assert explode.content == [
        {"type": "text", "text": "Error: Error executing tool explode: exploded: on purpose"}
    ]
    assert too_many.is_error  # the server enforces the maximum the subset could not
    assert "less than or equal to 5" in too_many.error.message
    assert bad_type.error.info.code == "INVALID_ARGS"  # refused before the server


async def test_read_only_tools_run_in_parallel_others_exclusive(tmp_path: Path) -> None:
    async with open_session(IMPORT_SERVER, tmp_path / "server.log") as session:
        registry = await _registry(session)
        modes = {
            name: registry.execution_mode(
                ToolExecutionInput("c", name, args, AbortController().signal)
            )
            for name, args in (("rendezvous", {"name": "x"}), ("add", {"a": 1, "b": 2}))
        }
        # Each rendezvous call returns only while the other one is inside the server.
        result = await registry.execute_batch(
            _batch(
                ("c1", "rendezvous", '{"name": "left"}'),
                ("c2", "rendezvous", '{"name": "right"}'),
            )
        )
    assert modes == {"rendezvous": "parallel", "add": "exclusive"}
    assert [r.result.value for r in result.results] == [
        [{"type": "text", "text": "left met someone"}],
        [{"type": "text", "text": "right met someone"}],
    ]


async def test_aborting_the_batch_cancels_the_request_on_the_server(tmp_path: Path) -> None:
    async with open_session(IMPORT_SERVER, tmp_path / "server.log") as session:
        registry = await _registry(session)
        controller = AbortController()
        running = asyncio.ensure_future(
            registry.execute_batch(_batch(("c1", "hang", "{}"), signal=controller.signal))
        )
        started = await session.call_tool("wait_started", {})
        controller.abort()
        result = await running
        seen = await session.call_tool("cancellations", {})
    assert started.content[0].text == "started"  # type: ignore[union-attr]
    assert result.results[0].result.error.info.code == "ABORTED"
    assert seen.content[0].text == "cancelled"  # type: ignore[union-attr]
    assert not seen.is_error


def test_an_input_schema_outside_the_subset_is_named() -> None:
    tools = [
        mcp_types.Tool(
            name="odd",
            input_schema={
                "type": "object",
                "properties": {"x": {"not": {"type": "null"}}, "y": {"type": "string"}},
            },
        ),
        mcp_types.Tool(name="fine", input_schema={"type": "object"}),
    ]

    async def connect() -> Any:
        raise AssertionError("never called")

    with pytest.raises(ValueError, match=r'MCP tool "odd".*schema\.properties\.x\.not') as err:
        mcp_tool_definitions(tools, connect)
    assert "include=" in str(err.value)
    (fine,) = mcp_tool_definitions(
        tools, connect, include=["fine"], placement=Placement(pool="mcp")
    )
    assert fine.name == "fine"
    assert fine.placement == Placement(pool="mcp")  # the worker pool that would host the session
