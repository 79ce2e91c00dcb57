"""Ending a namespace: every actor of it stops (the registry actor itself last, on its own)."""

from __future__ import annotations

import asyncio
import logging

from toolray_actors._handles import get_named, kill, named_actors
from toolray_actors._remote import send
from toolray_actors.execution._pool import PoolManager

__all__ = ("stop_namespace",)

_log = logging.getLogger("toolray")


async def stop_namespace(namespace: str) -> None:
    """Stop every named actor of ``namespace`` but the registry.

    Each pool first (it kills its own workers), then the executors and buckets.
    """
    names = await asyncio.to_thread(named_actors, namespace)
    pools = [n for n in names if n.startswith("toolray:pool:")]
    others = [n for n in names if n not in pools and n != "toolray:registry"]
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
