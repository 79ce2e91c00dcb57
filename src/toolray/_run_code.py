"""The reserved ``run_code`` Code Mode transport (one shared definition, R-COND-07).

Code Mode's program runtime is not built yet: the transport is visible, schematized and
collapsed exactly as specified, and a call to it fails with ``CODE_RUN_FAILED``.
"""

from __future__ import annotations

from typing import Any

from ._definition import RESERVED_TOOL_NAME, ToolDefinition, ToolOutput
from .errors import CodeRunFailedError

__all__ = ("RUN_CODE",)

_DESCRIPTION = (
    "Run a TypeScript program that calls the available tools through their SDK bindings. "
    "Use it to combine several tool calls in one step; the program's logs and its result "
    "are returned."
)


def _render(args: Any, value: Any) -> list[dict[str, Any]]:
    logs = list(value.get("logs", ())) if isinstance(value, dict) else []
    text = "\n".join(str(line) for line in logs)
    return [{"type": "text", "text": text or "(run_code completed with no output)"}]


def _execute(args: Any, ctx: Any) -> Any:
    raise CodeRunFailedError(
        "code run failed (unavailable): dsh-tools: run_code requires a code runtime — "
        "none is mounted in this runtime"
    )


RUN_CODE = ToolDefinition(
    name=RESERVED_TOOL_NAME,
    description=_DESCRIPTION,
    parameters={
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "What the program does."},
            "code": {"type": "string", "description": "The program source."},
        },
        "required": ["description", "code"],
    },
    output=ToolOutput(
        schema={
            "type": "object",
            "additionalProperties": False,
            "properties": {"logs": {"type": "array", "items": {"type": "string"}}, "result": {}},
            "required": ["logs"],
        },
        render=_render,
    ),
    execute=_execute,
)
