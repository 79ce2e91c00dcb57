"""Registry → executors: every change reaches every attached executor before a write returns.

There is no give-up timeout: a write waits until each executor has applied the change or
is known dead (Ray fails the call of a dead actor), because "a call that starts after a
write returns sees it" is the consistency the registry promises (DESIGN.md §2). A slow
executor is logged at debug level every ``_SLOW_S`` while the write waits for it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ._errors import is_actor_death

__all__ = ("Fanout",)

_log = logging.getLogger("toolray")

_SLOW_S = 30.0


def _as_future(ref: Any) -> asyncio.Future[Any]:
    return asyncio.wrap_future(ref.future())


class Fanout:
    """The attached executors and the change sequence."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.seq = 0
        self.executors: dict[str, Any] = {}

    async def publish(self, delta: tuple[Any, ...]) -> None:
        """Send change ``self.seq`` to every executor; return once each applied it (or died)."""
        names = list(self.executors)
        futures = [_as_future(self.executors[n].invalidate.remote(self.seq, delta)) for n in names]
        pending = set(futures)
        while pending:
            _, pending = await asyncio.wait(pending, timeout=_SLOW_S)
            if pending:
                _log.debug(
                    "toolray: %d executor(s) slow to apply change %d", len(pending), self.seq
                )
        for name, fut in zip(names, futures, strict=True):
            err = fut.exception()
            if err is None:
                continue
            if is_actor_death(err):
                self.executors.pop(name, None)
            else:  # it resyncs on the next sequence gap
                _log.debug("toolray: executor %s missed change %d: %r", name, self.seq, err)
