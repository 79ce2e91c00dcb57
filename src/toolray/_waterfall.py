"""Waterfalls: listeners composed around a default, the first registered outermost.

Each listener gets the stage arguments plus ``next``; ``next()`` runs the rest of the chain
from that listener's position (calling it twice re-runs the rest: a retry wrapper's rule).
Listeners may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

__all__ = ("maybe_await", "run_waterfall")

T = TypeVar("T")


async def maybe_await(value: Any) -> Any:
    """Await ``value`` if it is awaitable."""
    if inspect.isawaitable(value):
        return await value
    return value


async def run_waterfall(
    listeners: Sequence[Callable[..., Any]],
    args: tuple[Any, ...],
    last: Callable[[], Awaitable[T]],
) -> T:
    """Run ``listeners`` around ``last`` and return what the outermost one returns."""
    if not listeners:
        return await last()

    async def step(i: int) -> T:
        if i >= len(listeners):
            return await last()
        listener = listeners[i]
        return await maybe_await(listener(*args, lambda: step(i + 1)))  # type: ignore[no-any-return]

    return await step(0)
