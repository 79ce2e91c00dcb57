"""Agent-framework integrations: a framework's tool calls run through toolray.

One line in each framework moves its tool execution onto toolray — the scope's policies,
guards and restrictions, ordering, process isolation and kill-able timeouts on Ray — while
the framework keeps its own agent loop. Each integration is its own module and imports only
its own framework, so importing ``toolray`` (or this package) imports none of them:

- :mod:`toolray.integrations.pydantic_ai` — ``ToolrayToolset(source, scope=None)``, a
  Pydantic AI toolset (``pip install "toolray[integrations]"``);
- :mod:`toolray.integrations.langgraph` — ``ToolrayToolNode(source, scope=None)``, a
  LangGraph node running an AI message's tool calls as one toolray batch;
- :mod:`toolray.integrations.openai_agents` — ``function_tools(source, scope=None)``, the
  OpenAI Agents SDK's ``FunctionTool`` list.

``source`` is a ``ToolRegistry`` (in-process) or a ``RayRuntime`` (its registry and
executor actors); ``scope=None`` is the global scope. A failed call reaches the framework as
its ordinary tool-error message, never as an exception that ends the run.
"""

from __future__ import annotations

__all__ = ()
