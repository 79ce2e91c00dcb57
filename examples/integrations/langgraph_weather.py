"""LangGraph with toolray: an offline weather graph whose tool node is toolray's.

Needs the ``integrations`` extra (``langgraph`` among others): ``pip install
"toolray[integrations]"``; with ``--ray``, the ``ray`` extra too. From a clone,
``./scripts/setup`` installs every extra into ``.venv``.

A real ``StateGraph`` — an agent node, ``tools_condition``, a tools node — where the tools
node is ``ToolrayToolNode(source, scope)``: all tool calls of the agent's message run as
one toolray batch (parallel groups and exclusive barriers as toolray plans them), and one
``ToolMessage`` per call comes back, in order. The agent is an offline stand-in for an LLM
that builds its ``AIMessage`` by hand (no network, no API key)::

    python examples/integrations/langgraph_weather.py         # an in-process ToolRegistry
    python examples/integrations/langgraph_weather.py --ray   # RayRuntime: worker actors

With a real chat model, bind the node's tools to it —
``model.bind_tools(node.tool_schemas())`` — and call it in the agent node.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

try:
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition
except ImportError as missing:  # one line naming the extra, not a traceback
    package = str(missing.name).partition(".")[0]
    sys.exit(
        f"{Path(__file__).name} needs the integrations extra ({package} is not installed): "
        'pip install "toolray[integrations]"'
    )

from toolray import ToolRegistry, tool
from toolray.integrations.langgraph import ToolrayToolNode

SCOPE = "weather-agent"
CITIES = ("Paris", "Oslo", "Atlantis")
WEATHER = {"Paris": "sunny, 21 °C", "Oslo": "rain, 12 °C"}


@tool(concurrency_safe=True)
def get_weather(city: str) -> str:
    """Current weather in a city.

    Args:
        city: the city name, e.g. "Paris".
    """
    if city not in WEATHER:
        raise LookupError(f"no weather station in {city}")
    return WEATHER[city]


@tool
def delete_forecasts(city: str) -> str:
    """Delete a city's stored forecasts (the weather agent's scope may not)."""
    return f"deleted the forecasts of {city}"


def agent(state: MessagesState) -> dict[str, list[AnyMessage]]:
    """An offline stand-in for an LLM: ask for every city, then report the answers."""
    results = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    if not results:
        calls = [{"id": c, "name": "get_weather", "args": {"city": c}} for c in CITIES]
        return {"messages": [AIMessage("", tool_calls=calls)]}
    answer = "; ".join(f"{m.tool_call_id}: {m.content}" for m in results)
    return {"messages": [AIMessage(answer)]}


def build_graph(node: ToolrayToolNode) -> Any:
    """The graph: agent → tools (while the agent asks for tools) → agent."""
    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def run(source: Any, scope: str = SCOPE) -> str:
    """Register the tools on ``source`` (a ``ToolRegistry`` or a ``RayRuntime``), run the graph."""
    registry = getattr(source, "registry", source)
    with (
        registry.register(get_weather),
        registry.register(delete_forecasts),
        registry.scope(scope).restrict(allow=["get_weather"]),
    ):
        node = ToolrayToolNode(source, scope)
        print("tools offered:", [t["function"]["name"] for t in node.tool_schemas()])
        question = HumanMessage("What is the weather in Paris, Oslo and Atlantis?")
        state = build_graph(node).invoke({"messages": [question]})
        return str(state["messages"][-1].content)


def main(argv: list[str]) -> str:
    """Run the graph in-process, or on a local Ray with ``--ray``; print the answer."""
    if "--ray" in argv:
        from toolray_actors import RayRuntime

        with RayRuntime.start(address="local") as rt:  # a fresh local Ray, stopped after
            answer = run(rt)
    else:
        answer = run(ToolRegistry())
    print("answer:", answer)
    return answer


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except ImportError as missing:  # --ray without the ray extra: one line, not a traceback
        sys.exit(f"{Path(__file__).name}: {missing}")
