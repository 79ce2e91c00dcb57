"""LangGraph runs an AI message's tool calls as one toolray batch, in a real ``StateGraph``.

The model is LangChain's own offline chat model (``FakeMessagesListChatModel``) or a
hand-built ``AIMessage``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition

from tests.integrations._tools import add, explode, image_tool, secret, stamp_tool
from toolray import BatchExecutor, ToolBatchInput, ToolBatchResult, ToolRegistry
from toolray.integrations.langgraph import ToolrayToolNode


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


class CountingExecutor:
    """The registry's batch executor, recording each batch it runs (a registry hook)."""

    def __init__(self, registry: ToolRegistry) -> None:
        self.inner = BatchExecutor(registry)
        self.sections = self.inner.sections
        self.batches: list[list[str]] = []

    def describe(self, definitions: Any) -> Any:
        return self.inner.describe(definitions)

    async def execute(self, batch: ToolBatchInput) -> ToolBatchResult:
        self.batches.append([call.id for call in batch.calls])
        return await self.inner.execute(batch)


def _graph(node: ToolrayToolNode, *responses: AIMessage) -> Any:
    """agent → tools → agent … with LangChain's fake chat model as the agent."""
    model = FakeMessagesListChatModel(responses=[*responses, AIMessage("done")])

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(State)
    builder.add_node("agent", agent)
    builder.add_node(node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def _calls(*calls: tuple[str, str, Any]) -> AIMessage:
    return AIMessage(
        "", tool_calls=[{"id": i, "name": name, "args": args} for i, name, args in calls]
    )


def _tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


async def test_one_message_is_one_batch_with_toolrays_groups_and_barriers() -> None:
    registry = ToolRegistry()
    registry.register(stamp_tool("safe"))
    registry.register(stamp_tool("unsafe", safe=False))
    counter = CountingExecutor(registry)
    registry.set_executor(counter)
    message = _calls(
        ("a", "safe", {"key": "a", "ms": 300}),
        ("b", "safe", {"key": "b", "ms": 300}),
        ("c", "unsafe", {"key": "c", "ms": 50}),
        ("d", "safe", {"key": "d", "ms": 50}),
    )
    state = await _graph(ToolrayToolNode(registry), message).ainvoke(
        {"messages": [HumanMessage("go")]}
    )
    assert counter.batches == [["a", "b", "c", "d"]]
    messages = _tool_messages(state)
    assert [(m.tool_call_id, m.content, m.status) for m in messages] == [
        ("a", "a", "success"),
        ("b", "b", "success"),
        ("c", "c", "success"),
        ("d", "d", "success"),
    ]
    span = {m.tool_call_id: (m.artifact["start"], m.artifact["end"]) for m in messages}
    assert max(span["a"][0], span["b"][0]) < min(span["a"][1], span["b"][1])  # together
    assert max(span["a"][1], span["b"][1]) <= span["c"][0]  # the barrier waits for both
    assert span["c"][1] <= span["d"][0]  # and runs alone
    assert state["messages"][-1].content == "done"


def test_failures_are_error_messages_in_order_and_the_graph_goes_on() -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(explode)
    registry.scope("agent").guard(lambda e: "no" if e.name == "add" and e.call_id == "g" else None)
    message = _calls(
        ("x", "explode", {"reason": "kaboom"}),
        ("ok", "add", {"a": 1, "b": 2}),
        ("bad", "add", {"a": "one"}),
        ("g", "add", {"a": 1, "b": 1}),
        ("ghost", "ghost", {}),
    )
    state = _graph(ToolrayToolNode(registry, "agent"), message).invoke(
        {"messages": [HumanMessage("go")]}
    )
    messages = _tool_messages(state)
    assert [(m.tool_call_id, m.name, m.status) for m in messages] == [
        ("x", "explode", "error"),
        ("ok", "add", "success"),
        ("bad", "add", "error"),
        ("g", "add", "error"),
        ("ghost", "ghost", "error"),
    ]
    contents = [m.content for m in messages]
    assert contents[0] == "Error: kaboom"
    assert contents[1] == "3"
    assert contents[2].startswith("Error: invalid arguments")
    assert contents[3] == "Error: no"
    assert contents[4].startswith("Error: ")
    assert [m.artifact for m in messages] == [None, 3, None, None, None]
    assert state["messages"][-1].content == "done"


def test_a_restricted_tool_is_not_offered_and_is_refused() -> None:
    registry = ToolRegistry()
    registry.register(add)
    registry.register(secret)
    registry.scope("agent").restrict(allow=["add"])
    node = ToolrayToolNode(registry, "agent")
    assert [t["function"]["name"] for t in node.tool_schemas()] == ["add"]
    assert [t["function"]["name"] for t in ToolrayToolNode(registry).tool_schemas()] == [
        "add",
        "secret",
    ]
    (message,) = node.invoke([_calls(("s", "secret", {"key": "k"}))])
    assert message.status == "error"
    assert "secret" in message.content


@dataclass
class ObjectState:
    chat: list[Any] = field(default_factory=list)


async def test_the_state_shapes_of_tool_node() -> None:
    registry = ToolRegistry()
    registry.register(add)
    node = ToolrayToolNode(registry)
    ai = _calls(("c1", "add", {"a": 1, "b": 2}))
    (listed,) = await node.ainvoke([HumanMessage("go"), ai])
    assert listed.content == "3"
    keyed = ToolrayToolNode(registry, messages_key="chat").invoke(ObjectState(chat=[ai]))
    assert [m.content for m in keyed["chat"]] == ["3"]
    call = {"type": "tool_call", "id": "t1", "name": "add", "args": {"a": 2, "b": 2}}
    (direct,) = node.invoke([call])
    assert (direct.tool_call_id, direct.content) == ("t1", "4")
    assert node.invoke({"messages": [AIMessage("no calls")]}) == {"messages": []}
    with pytest.raises(ValueError, match="no AIMessage"):
        node.invoke({"messages": [HumanMessage("hi")]})
    with pytest.raises(ValueError, match="no messages"):
        node.invoke({"other": []})


async def test_invoke_works_inside_a_running_loop() -> None:
    registry = ToolRegistry()
    registry.register(add)
    asyncio.get_running_loop()  # a sync invoke here runs the batch on a thread of its own
    messages = ToolrayToolNode(registry).invoke([_calls(("c", "add", {"a": 5, "b": 5}))])
    assert [m.content for m in messages] == ["10"]


def test_images_become_image_content_blocks() -> None:
    registry = ToolRegistry()
    registry.register(image_tool())
    (message,) = ToolrayToolNode(registry).invoke([_calls(("p", "snapshot", {}))])
    text, image = message.content
    assert text == {"type": "text", "text": "one pixel"}
    assert image["type"] == "image"
    assert image["mime_type"] == "image/png"
    assert image["base64"].startswith("iVBOR")


def test_bad_arguments_are_type_errors() -> None:
    with pytest.raises(TypeError, match="ToolrayToolNode: source must be"):
        ToolrayToolNode("registry")
    with pytest.raises(TypeError, match="ToolrayToolNode: scope must be a str or None"):
        ToolrayToolNode(ToolRegistry(), scope=1)  # type: ignore[arg-type]


def test_the_node_names_itself_for_add_node() -> None:
    node = ToolrayToolNode(ToolRegistry(), "agent", name="run_tools")
    builder = StateGraph(State)
    builder.add_node(node)
    builder.add_edge(START, "run_tools")
    builder.add_edge("run_tools", END)
    assert "run_tools" in builder.compile().get_graph().nodes
