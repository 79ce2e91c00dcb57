"""Pydantic AI with toolray: an offline weather agent whose tool calls run through toolray.

Needs the ``integrations`` extra (``pydantic-ai-slim`` among others): ``pip install
"toolray[integrations]"``; with ``--ray``, the ``ray`` extra too. From a clone,
``./scripts/setup`` installs every extra into ``.venv``.

The model is Pydantic AI's own ``FunctionModel`` (no network, no API key): it asks for the
weather in three cities at once, then reports what the tools answered. One line moves the
agent's tool execution onto toolray — ``toolsets=[ToolrayToolset(source, scope)]``::

    python examples/integrations/pydantic_ai_weather.py         # an in-process ToolRegistry
    python examples/integrations/pydantic_ai_weather.py --ray   # RayRuntime: worker actors

Swap ``FunctionModel(weather_model)`` for ``"openai:gpt-5"`` (or any model Pydantic AI
supports) and the same agent runs against a real model.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

try:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
except ImportError as missing:  # one line naming the extra, not a traceback
    package = str(missing.name).partition(".")[0]
    sys.exit(
        f"{Path(__file__).name} needs the integrations extra ({package} is not installed): "
        'pip install "toolray[integrations]"'
    )

from toolray import ToolRegistry, tool
from toolray.integrations.pydantic_ai import ToolrayToolset

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


def weather_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """An offline stand-in for an LLM: ask for every city, then report the answers."""
    results = [part for part in messages[-1].parts if isinstance(part, ToolReturnPart)]
    if not results:
        print("tools offered:", [t.name for t in info.function_tools])
        calls = [ToolCallPart("get_weather", {"city": c}, tool_call_id=c) for c in CITIES]
        return ModelResponse(parts=calls)
    return ModelResponse(
        parts=[TextPart("; ".join(f"{r.tool_call_id}: {r.content}" for r in results))]
    )


def run(source: Any, scope: str = SCOPE) -> str:
    """Register the tools on ``source`` (a ``ToolRegistry`` or a ``RayRuntime``), run the agent."""
    registry = getattr(source, "registry", source)
    with (
        registry.register(get_weather),
        registry.register(delete_forecasts),
        registry.scope(scope).restrict(allow=["get_weather"]),
    ):
        agent = Agent(FunctionModel(weather_model), toolsets=[ToolrayToolset(source, scope)])
        question = "What is the weather in Paris, Oslo and Atlantis?"
        return str(asyncio.run(agent.run(question)).output)


def main(argv: list[str]) -> str:
    """Run the agent in-process, or on a local Ray with ``--ray``; print the answer."""
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
