"""The OpenAI Agents SDK with toolray: an offline weather agent whose tools run on toolray.

Needs the ``integrations`` extra (``openai-agents`` among others): ``pip install
"toolray[integrations]"``; with ``--ray``, the ``ray`` extra too. From a clone,
``./scripts/setup`` installs every extra into ``.venv``.

The model is the Agents SDK's own ``ScriptedModel`` (``agents.testing``; no network, no API
key): it asks for the weather in three cities at once, then reports what the tools
answered. One line moves the agent's tool execution onto toolray —
``tools=function_tools(source, scope)``::

    python examples/integrations/openai_agents_weather.py         # an in-process ToolRegistry
    python examples/integrations/openai_agents_weather.py --ray   # RayRuntime: worker actors

Drop ``model=`` (and set ``OPENAI_API_KEY``) and the same agent runs against a real model.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

try:
    from agents import Agent, RunConfig, Runner
    from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call
except ImportError as missing:  # one line naming the extra, not a traceback
    package = str(missing.name).partition(".")[0]
    sys.exit(
        f"{Path(__file__).name} needs the integrations extra ({package} is not installed): "
        'pip install "toolray[integrations]"'
    )

from toolray import ToolRegistry, tool
from toolray.integrations.openai_agents import function_tools

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


def report(call: ModelCall) -> Any:
    """The model's second turn: report what the tools answered, call by call."""
    outputs = [item for item in call.input if item.get("type") == "function_call_output"]
    return [assistant_message("; ".join(f"{o['call_id']}: {o['output']}" for o in outputs))]


def weather_model() -> ScriptedModel:
    """An offline stand-in for an LLM: ask for every city, then report the answers."""
    ask = [function_call("get_weather", {"city": c}, call_id=c) for c in CITIES]
    return ScriptedModel([ask, ModelStep.respond(report)])


def run(source: Any, scope: str = SCOPE) -> str:
    """Register the tools on ``source`` (a ``ToolRegistry`` or a ``RayRuntime``), run the agent."""
    registry = getattr(source, "registry", source)
    with (
        registry.register(get_weather),
        registry.register(delete_forecasts),
        registry.scope(scope).restrict(allow=["get_weather"]),
    ):
        tools = function_tools(source, scope)
        print("tools offered:", [t.name for t in tools])
        agent = Agent(name="weather", model=weather_model(), tools=tools)
        question = "What is the weather in Paris, Oslo and Atlantis?"
        no_tracing = RunConfig(tracing_disabled=True)
        result = asyncio.run(Runner.run(agent, question, run_config=no_tracing))
        return str(result.final_output)


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
