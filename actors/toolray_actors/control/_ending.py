"""Ending a namespace: every actor of it stops (the registry actor itself last, on its own)."""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from toolray_actors._handles import get_named, kill, named_actors
from toolray_actors._remote import send
from toolray_actors.execution._pool import PoolManager

__all__ = ("stop_namespace",)

_log = logging.getLogger("toolray")


class _Executor(Protocol):
    """What ending a namespace asks of an executor actor (whose module imports this one)."""

    async def close_environments(self) -> int:
        """Close every environment instance it holds; how many."""
        ...


_CLOSE_S = 10.0
"""How long the executors may take to close their environment instances."""


async def stop_namespace(namespace: str) -> None:
    """Stop every named actor of ``namespace`` but the registry.

    The executors close their environment instances first (their ``close`` runs where the
    states live), then each pool stops (it kills its own workers), then the executors and
    buckets.
    """
    names = await asyncio.to_thread(named_actors, namespace)
    pools = [n for n in names if n.startswith("toolray:pool:")]
    others = [n for n in names if n not in pools and n != "toolray:registry"]
    executors = [get_named(n, namespace) for n in others if n.startswith("toolray:executor:")]
    closing = [
        asyncio.wrap_future(send(h, _Executor.close_environments).future())
        for h in executors
        if h is not None
    ]
    if closing:
        done, _ = await asyncio.wait(closing, timeout=_CLOSE_S)
        for failed in (f for f in done if f.exception() is not None):
            _log.debug("toolray: an executor did not close its instances: %r", failed.exception())
    for name in pools:  # each pool kills its own workers first
        handle = get_named(name, namespace)
        if handle is not None:
            try:
                await asyncio.wait_for(
                    asyncio.wrap_future(send(handle, PoolManager.shutdown).future()), 5
                )
            except Exception:
                _log.debug("toolray: pool %s did not shut down cleanly", name, exc_info=True)
            kill(handle)
    for name in others:
        handle = get_named(name, namespace)
        if handle is not None:
            kill(handle)
