"""Provider adapters: OpenAI, Anthropic and MCP in and out (``toolray[openai|anthropic|mcp]``).

Each adapter is its own module, so importing ``toolray`` (or this package) imports no
provider SDK:

- :mod:`toolray.adapters.openai` — Chat Completions and Responses API tool calls in
  (``calls_from_openai``), tool lists and results out (``tools_for_openai``,
  ``results_to_openai``);
- :mod:`toolray.adapters.anthropic` — ``tool_use`` blocks in (``calls_from_anthropic``),
  tool lists and ``tool_result`` blocks out (``tools_for_anthropic``,
  ``results_to_anthropic``);
- :mod:`toolray.adapters.mcp` — an MCP server's tools as definitions
  (``import_mcp_tools``) and a registry scope as an MCP server (``serve_mcp``).

The OpenAI and Anthropic adapters read SDK objects and plain dicts alike and return plain
dicts that the SDKs accept as request parameters; the MCP adapter runs on the ``mcp`` SDK.
"""

from __future__ import annotations

__all__ = ()
