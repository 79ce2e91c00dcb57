"""An agent loop over toolray, with scripted model responses (no network, no API key).

Needs the ``openai`` and ``anthropic`` extras (their SDKs' types): ``pip install
"toolray[openai,anthropic]"``; with ``--ray``, the ``ray`` extra too. From a clone,
``./scripts/setup`` installs every extra into ``.venv``.

Each step takes a model response shaped like the provider's SDK objects (OpenAI Chat
Completions, the OpenAI Responses API or Anthropic Messages), runs its tool calls as one
batch, and builds the next request from the results, which the scripted model then reads::

    python examples/agent_loop.py                        # OpenAI Chat Completions
    python examples/agent_loop.py --provider responses   # OpenAI Responses API
    python examples/agent_loop.py --provider anthropic   # Anthropic Messages
    python examples/agent_loop.py --ray                  # batches on a local Ray cluster

Swap ``ScriptedModel.respond`` for ``client.chat.completions.create(**request)`` (or
``client.responses.create`` / ``client.messages.create``) and the loop runs against the
real API unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from anthropic.types import Message
    from openai.types.chat import ChatCompletion
    from openai.types.responses import Response
except ImportError as missing:  # one line naming the extra, not a traceback
    package = str(missing.name).partition(".")[0]
    sys.exit(
        f"{Path(__file__).name} needs the openai and anthropic extras ({package} is not "
        'installed): pip install "toolray[openai,anthropic]"'
    )

from toolray import AbortController, ToolBatchInput, ToolBatchResult, ToolCall, ToolRegistry, tool
from toolray.adapters.anthropic import (
    calls_from_anthropic,
    results_to_anthropic,
    tools_for_anthropic,
)
from toolray.adapters.openai import calls_from_openai, results_to_openai, tools_for_openai

SCOPE = "agent-1"
CITIES = ("Paris", "Oslo", "Atlantis")
WEATHER = {"Paris": (21, "sunny"), "Oslo": (12, "rain")}


@tool(concurrency_safe=True)
def get_weather(city: str) -> dict[str, Any]:
    """Current weather in a city.

    Args:
        city: the city name, e.g. "Paris".
    """
    if city not in WEATHER:
        raise LookupError(f"no weather station in {city}")
    celsius, sky = WEATHER[city]
    return {"city": city, "celsius": celsius, "sky": sky}


# ---------------------------------------------------------------- where batches run
class InProcess:
    """Batches on an in-process ``ToolRegistry``."""

    def __init__(self) -> None:
        self.registry = ToolRegistry()
        self.registry.register(get_weather)
        self.registry.scope(SCOPE)

    def run(self, calls: list[ToolCall]) -> ToolBatchResult:
        """Run one batch to completion."""
        batch = ToolBatchInput(calls, AbortController().signal, scope=SCOPE)
        return asyncio.run(self.registry.execute_batch(batch))

    def close(self) -> None:
        """Nothing to release in-process."""


class OnRay:
    """Batches on the scope's executor actor of a local Ray cluster."""

    def __init__(self) -> None:
        from toolray_actors import RayRuntime

        self.runtime = RayRuntime.start(address="local")
        self.registry = self.runtime.registry
        self.registry.register(get_weather)
        self.runtime.scope(SCOPE)

    def run(self, calls: list[ToolCall]) -> ToolBatchResult:
        """Run one batch on the scope's executor actor."""
        batch = ToolBatchInput(calls, AbortController().signal, scope=SCOPE)
        return self.runtime.executor(SCOPE).execute_batch_sync(batch)

    def close(self) -> None:
        """Stop the runtime (and the local cluster it started)."""
        self.runtime.shutdown()


# ---------------------------------------------------------------- the scripted model
@dataclass
class ScriptedModel:
    """Turn 1 asks for the weather in three cities; turn 2 answers from the tool results."""

    provider: str
    requests: list[dict[str, Any]] = field(default_factory=list)

    def respond(self, request: dict[str, Any]) -> Any:
        """The next response, shaped like the provider SDK's own object."""
        self.requests.append(json.loads(json.dumps(request)))  # what would go on the wire
        results = _tool_results(self.provider, request)
        if not results:
            calls = [(f"call_{city.lower()}", "get_weather", {"city": city}) for city in CITIES]
            return _response(self.provider, calls=calls)
        answer = "; ".join(results[f"call_{city.lower()}"] for city in CITIES)
        return _response(self.provider, text=answer)


def _tool_results(provider: str, request: dict[str, Any]) -> dict[str, str]:
    """The model's view of the tool results in a request: call id → text."""
    if provider == "responses":
        return {
            i["call_id"]: i["output"] for i in request["input"] if "call_id" in i and "output" in i
        }
    if provider == "anthropic":
        turns = [m["content"] for m in request["messages"] if isinstance(m["content"], list)]
        blocks = [block for content in turns for block in content]
        return {
            b["tool_use_id"]: b["content"][0]["text"] for b in blocks if b["type"] == "tool_result"
        }
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def _response(provider: str, *, calls: list[Any] = (), text: str = "") -> Any:  # type: ignore[assignment]
    if provider == "anthropic":
        content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        content += [{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls]
        return Message.model_validate(
            {"id": "msg", "type": "message", "role": "assistant", "model": "scripted",
             "content": content, "stop_reason": "tool_use" if calls else "end_turn",
             "usage": {"input_tokens": 0, "output_tokens": 0}}
        )  # fmt: skip
    if provider == "responses":
        output: list[dict[str, Any]] = [
            {"type": "function_call", "call_id": i, "name": n, "arguments": json.dumps(a)}
            for i, n, a in calls
        ]
        if text:
            part = {"type": "output_text", "text": text, "annotations": []}
            output.append(
                {"type": "message", "id": "msg", "role": "assistant", "status": "completed",
                 "content": [part]}
            )  # fmt: skip
        return Response.model_validate(
            {"id": "resp", "created_at": 0, "model": "scripted", "object": "response",
             "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": []}
        )  # fmt: skip
    tool_calls = [
        {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls
    ]
    message = {"role": "assistant", "content": text or None, "tool_calls": tool_calls or None}
    return ChatCompletion.model_validate(
        {"id": "cmpl", "object": "chat.completion", "created": 0, "model": "scripted",
         "choices": [{"index": 0, "message": message,
                      "finish_reason": "tool_calls" if calls else "stop"}]}
    )  # fmt: skip


# ---------------------------------------------------------------- the loop
def run_agent(
    question: str, provider: str = "chat", *, on_ray: bool = False
) -> tuple[str, ScriptedModel]:
    """Run the loop until the model answers without tool calls; returns (answer, model)."""
    runner = OnRay() if on_ray else InProcess()
    model = ScriptedModel(provider)
    try:
        history: list[Any] = [{"role": "user", "content": question}]
        for _ in range(5):
            response = model.respond(_request(provider, runner.registry, history))
            calls = (
                calls_from_anthropic(response)
                if provider == "anthropic"
                else calls_from_openai(response)
            )
            history += _assistant_turn(provider, response)
            if not calls:
                return _final_text(provider, response), model
            for call in calls:
                print(f"  -> {call.name}({call.arguments})")
            result = runner.run(calls)
            history += _results(provider, result)
        raise RuntimeError("the model did not finish in 5 steps")
    finally:
        runner.close()


def _request(provider: str, registry: Any, history: list[Any]) -> dict[str, Any]:
    if provider == "anthropic":
        tools = tools_for_anthropic(registry, SCOPE)
        return {"model": "claude-x", "max_tokens": 1024, "messages": history, "tools": tools}
    if provider == "responses":
        return {
            "model": "gpt-x",
            "input": history,
            "tools": tools_for_openai(registry, SCOPE, api="responses"),
        }
    return {"model": "gpt-x", "messages": history, "tools": tools_for_openai(registry, SCOPE)}


def _assistant_turn(provider: str, response: Any) -> list[Any]:
    if provider == "anthropic":
        return [
            {
                "role": "assistant",
                "content": [b.model_dump(exclude_none=True) for b in response.content],
            }
        ]
    if provider == "responses":
        return [item.model_dump(exclude_none=True) for item in response.output]
    return [response.choices[0].message.model_dump(exclude_none=True)]


def _results(provider: str, result: ToolBatchResult) -> list[Any]:
    if provider == "anthropic":
        return [results_to_anthropic(result)]
    return results_to_openai(result, api="responses" if provider == "responses" else "chat")


def _final_text(provider: str, response: Any) -> str:
    if provider == "anthropic":
        return "".join(block.text for block in response.content if block.type == "text")
    if provider == "responses":
        return str(response.output_text)
    return str(response.choices[0].message.content)


def main(argv: list[str] | None = None) -> str:
    """Parse the command line, run the loop, print and return the answer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=("chat", "responses", "anthropic"), default="chat")
    parser.add_argument("--ray", action="store_true", help="run the batches on a local Ray cluster")
    args = parser.parse_args(argv)
    print(f"[{args.provider}{' on Ray' if args.ray else ''}] What is the weather?")
    answer, _ = run_agent(
        "What is the weather in Paris, Oslo and Atlantis?", args.provider, on_ray=args.ray
    )
    print(f"  <- {answer}")
    return answer


if __name__ == "__main__":
    try:
        main()
    except ImportError as missing:  # --ray without the ray extra: one line, not a traceback
        sys.exit(f"{Path(__file__).name}: {missing}")
