"""Getting a rate-limited tool's code onto its pool's workers before its call's token.

A tool's first call on a worker loads its code there (in the worker, or in the template its
call processes fork from). After the rate-limit token, that load would delay the start, and
a late start bunches with the punctual ones that follow: so the body runner asks this
first. Best effort (once per worker and tool): what fails here, the call's dispatch reports.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from toolray import Placement, ToolDefinition
from toolray.lowlevel import Call
from toolray_actors._remote import send

from ._pool_client import PoolClient, WorkerSlot
from ._worker import ToolWorker

__all__ = ("CodePreparer",)

_log = logging.getLogger("toolray")


class CodePreparer:
    """Sends a tool's code to every member of its pool, once per worker."""

    def __init__(
        self,
        pools: Callable[[Placement | None], PoolClient],
        key_of: Callable[[ToolDefinition], tuple[str, bytes] | None],
    ) -> None:
        self._pools = pools
        self._key_of = key_of
        self._preparing: dict[tuple[str, str], asyncio.Future[bool]] = {}

    async def prepare(self, call: Call) -> None:
        """Before a rate-limited call takes its token: its pool's members hold its code."""
        definition = call.definition
        found = self._key_of(definition)
        if found is None or definition.environment is not None:
            return  # an environment's tool runs in its instance, wherever that is
        key, blob = found
        pool = self._pools(definition.placement)
        try:
            if not pool.slots:
                await pool.pick(call.input.signal)
            await asyncio.gather(*(self._prepared(s, key, blob) for s in list(pool.slots.values())))
        except Exception:  # aborted meanwhile, or the pool is recovering: dispatch will tell
            _log.debug("toolray: preparing %s failed", key, exc_info=True)

    async def _prepared(self, slot: WorkerSlot, key: str, blob: bytes) -> None:
        if key in slot.sent:
            return
        task = self._preparing.get((slot.wid, key))
        if task is None:
            task = asyncio.ensure_future(send(slot.handle, ToolWorker.prepare, key, blob))
            self._preparing[(slot.wid, key)] = task
            task.add_done_callback(lambda _: self._preparing.pop((slot.wid, key), None))
        if await task:
            slot.sent.add(key)
