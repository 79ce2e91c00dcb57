"""Tools of the tracing suite."""

from __future__ import annotations

from toolray import tool


@tool(concurrency_safe=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def boom() -> int:
    """Always fails."""
    raise ValueError("no luck")
