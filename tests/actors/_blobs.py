"""A tool's definition as a worker receives it: the pickled blob of a one-tool definition."""

from __future__ import annotations

from typing import Any

import cloudpickle

from toolray import ToolOutput, define_tool, text_block


def tool_blob(execute: Any) -> bytes:
    """The cloudpickled definition of a tool ``t`` that runs ``execute`` (a JSON output)."""
    definition = define_tool(
        name="t",
        description=None,
        parameters={},
        output=ToolOutput(schema={"type": "json"}, render=lambda a, v: [text_block(str(v))]),
        execute=execute,
    )
    return bytes(cloudpickle.dumps(definition))
