"""The shared parts: sources, tool infos (sequential or not), the lane, rendering."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.integrations._tools import add, image_tool
from toolray import ToolCall, ToolOutput, ToolRegistry, define_tool, text_block
from toolray.integrations._lane import Lane
from toolray.integrations._render import render_all
from toolray.integrations._source import (
    ToolInfo,
    check_scope,
    read_tools,
    read_tools_now,
    registry_of,
    run_calls,
)
from toolray.testing import Gate, RecordingTool

_TEXT = ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(str(v))])


class FakeRuntime:
    """Anything with a ``registry`` is a runtime (the core never imports the Ray layer)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.registry = registry


# ---------------------------------------------------------------- sources
def test_a_registry_or_a_runtime_is_a_source() -> None:
    registry = ToolRegistry()
    assert registry_of(registry, "x") is registry
    assert registry_of(FakeRuntime(registry), "x") is registry


@pytest.mark.parametrize("bad", [None, 3, "registry", object()])
def test_anything_else_is_a_type_error_naming_the_caller(bad: Any) -> None:
    with pytest.raises(TypeError, match=r"^where: source must be a ToolRegistry or a RayRuntime"):
        registry_of(bad, "where")


def test_a_scope_is_a_str_or_none() -> None:
    assert check_scope(None, "x") is None
    assert check_scope("agent", "x") == "agent"
    with pytest.raises(TypeError, match="scope must be a str or None, not int"):
        check_scope(7, "x")


# ---------------------------------------------------------------- tool infos
def _info(classify: Any) -> ToolInfo:
    return ToolInfo(name="t", description="", parameters={}, classify=classify)


def test_a_tool_is_concurrent_only_when_its_classifier_says_true_without_arguments() -> None:
    registry = ToolRegistry()
    registry.register(add)  # @tool(concurrency_safe=True), with required parameters
    registry.register(RecordingTool("safe_rec", safe=True).definition())
    registry.register(RecordingTool("unsafe_rec", safe=False).definition())
    registry.register(
        define_tool(
            name="plain",
            description="no classifier",
            parameters={},
            output=_TEXT,
            execute=lambda args, ctx: "x",
        )
    )
    flags = {info.name: info.sequential for info in read_tools_now(registry, None)}
    assert flags == {"add": False, "safe_rec": False, "unsafe_rec": True, "plain": True}


def test_a_verdict_that_needs_arguments_is_sequential_but_each_call_is_classified() -> None:
    info = _info(lambda args: args["path"].startswith("/tmp/"))
    assert info.sequential
    assert info.mode({"path": "/tmp/x"}) == "parallel"
    assert info.mode({"path": "/etc/x"}) == "exclusive"
    assert info.mode({}) == "exclusive"  # a raising classifier fails closed
    assert info.mode('{"path": "/tmp/x"}') == "exclusive"  # unparsed text: not classified
    assert _info(lambda args: 1).mode({}) == "exclusive"  # only an exact True is parallel
    assert _info(None).mode({}) == "exclusive"


def test_the_scope_view_is_what_is_listed() -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(image_tool())
    registry.scope("agent").restrict(allow=["add"])
    assert [i.name for i in read_tools_now(registry, None)] == ["add", "snapshot"]
    assert [i.name for i in asyncio.run(read_tools(registry, "agent"))] == ["add"]
    (info,) = read_tools_now(registry, "agent")
    assert info.description == "Add two integers."
    assert info.parameters["required"] == ["a", "b"]


# ---------------------------------------------------------------- running and rendering
async def test_a_batch_renders_text_failures_and_images_in_order() -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(image_tool())
    calls = [
        ToolCall("c1", "add", {"a": 1, "b": 2}),
        ToolCall("c2", "add", '{"a": 1'),
        ToolCall("c3", "snapshot", {}),
    ]
    first, second, third = render_all(await run_calls(registry, None, calls))
    assert (first.call_id, first.text, first.is_error, first.value) == ("c1", "3", False, 3)
    assert second.is_error
    assert second.text.startswith("Error: invalid arguments")
    assert second.value is None
    assert third.text == "one pixel"
    assert [image.mime_type for image in third.images] == ["image/png"]
    assert third.images[0].data_url.startswith("data:image/png;base64,iVBOR")


async def test_a_cancelled_caller_stops_its_batch() -> None:
    registry = ToolRegistry()
    seen: list[str] = []
    started = Gate()

    async def body(args: Any, ctx: Any) -> str:
        started.open()
        try:
            await ctx.signal.wait()
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return "not cancelled"

    registry.register(
        define_tool(name="wait", description="", parameters={}, output=_TEXT, execute=body)
    )
    task = asyncio.ensure_future(run_calls(registry, None, [ToolCall("c1", "wait", {})]))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == ["cancelled"]


# ---------------------------------------------------------------- the lane
async def _run_lane(modes: list[str]) -> list[str]:
    """Start one task per mode in order; each records its start and end around two yields."""
    lane, events = Lane(), []

    async def call(index: int, mode: Any) -> None:
        async with lane.turn(mode):
            events.append(f"start {index}")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            events.append(f"end {index}")

    await asyncio.gather(*(call(i, mode) for i, mode in enumerate(modes)))
    return events


async def test_the_lane_overlaps_safe_calls_and_runs_others_alone_in_arrival_order() -> None:
    events = await _run_lane(["parallel", "parallel", "exclusive", "parallel", "parallel"])
    assert events[:2] == ["start 0", "start 1"]  # a safe group overlaps
    assert events[2:4] == ["end 0", "end 1"]
    assert events[4:6] == ["start 2", "end 2"]  # the barrier runs alone, after the group
    assert events[6:8] == ["start 3", "start 4"]


async def test_consecutive_exclusive_calls_never_overlap() -> None:
    events = await _run_lane(["exclusive", "exclusive", "exclusive"])
    assert events == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]


async def test_a_call_cancelled_while_waiting_frees_its_place() -> None:
    lane, first_in, release = Lane(), Gate(), Gate()
    order: list[str] = []

    async def hold() -> None:
        async with lane.turn("exclusive"):
            first_in.open()
            await release.wait()
            order.append("first")

    async def queued(name: str) -> None:
        async with lane.turn("exclusive"):
            order.append(name)

    first = asyncio.ensure_future(hold())
    await first_in.wait()
    doomed = asyncio.ensure_future(queued("doomed"))
    last = asyncio.ensure_future(queued("last"))
    await asyncio.sleep(0)
    doomed.cancel()
    release.open()
    await asyncio.gather(first, last, return_exceptions=True)
    assert doomed.cancelled()
    assert order == ["first", "last"]
    assert not first.cancelled()  # cancelling a waiter never cancels the call it waited for
