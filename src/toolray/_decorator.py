"""``@tool``: a ToolDefinition from a plain function (placeholder until implemented)."""

from __future__ import annotations

from typing import Any

__all__ = ("tool",)


def tool(*args: Any, **kwargs: Any) -> Any:
    """Build a ToolDefinition from a function's signature (not implemented yet)."""
    raise NotImplementedError("@tool is being implemented")
