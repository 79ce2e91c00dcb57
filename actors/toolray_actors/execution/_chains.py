"""The executor's side of chains: the worker a chain runs on, and which places have ended.

A chain (see ``toolray.lowlevel.ChainRunner``) runs on one worker, picked by its first call;
its worker's gate orders its calls. The executor keeps two things per chain: that worker,
and the places that ended here (an outcome came back, or the call never went out). A call
that cannot go to the chain's worker — its tool runs in the executor, or the worker was
retired before the chain reached it — waits here for its stage's turn instead and goes out
unlinked; the worker hears that its place has ended (``ToolWorker.chain_done``), so the
places after it go on.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from toolray import AbortError, AbortSignal
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH
from toolray.lowlevel import Link

from ._chain_gate import Places
from ._pool_client import PoolClient, WorkerSlot

__all__ = ("RunnerChains", "fits")

_T = TypeVar("_T")

_DONE = 1024
"""Ended chains kept to answer a commit that comes after an abort."""


def fits(definition: Any, cap: int, pool: PoolClient) -> bool:
    """Whether ``definition``'s calls can run in a chain.

    Not with a rate limit or a retry policy (each call waits or re-runs on its own), and only
    on a fixed pool whose workers have room for ``cap`` bodies (a GPU pool runs one at a
    time; an elastic pool grows on calls that wait for a member).
    """
    if definition.rate_limit is not None or definition.retry is not None:
        return False
    return not pool.elastic and pool.per_worker >= cap


@dataclass(eq=False)
class _Chain:
    size: int
    slot: asyncio.Future[WorkerSlot] | None = None
    broken: bool = False
    ended: Places = field(default_factory=Places)  # the places that ended here
    frontier: asyncio.Future[int] | None = None  # where the abort found the chain's worker
    turns: dict[asyncio.Future[None], int] = field(default_factory=dict)  # → its stage's start
    unsent: list[Link] = field(default_factory=list)  # ended before the worker was known


class RunnerChains:
    """Every chain of one runner."""

    def __init__(
        self,
        prefix: str,
        *,
        notify: Callable[[WorkerSlot, Link], object],
        ask: Callable[[WorkerSlot, Link], Awaitable[int]],
    ) -> None:
        self._prefix = prefix
        self._ids = itertools.count(1)
        self._notify = notify  # a worker hears that a place of its chain ended
        self._ask = ask  # a worker says where an abort found its chain
        self._chains: dict[str, _Chain] = {}
        self._done: OrderedDict[str, _Chain] = OrderedDict()

    def new(self) -> str:
        """A new chain's id."""
        return f"{self._prefix}chain-{next(self._ids)}"

    def _of(self, link: Link) -> _Chain:
        chain = self._chains.get(link.chain)
        if chain is None:
            chain = self._chains[link.chain] = _Chain(link.size)
        return chain

    async def slot(
        self, link: Link, pick: Callable[[], Awaitable[WorkerSlot]]
    ) -> WorkerSlot | None:
        """The chain's worker (its first call picks it); ``None`` once the chain is broken."""
        chain = self._of(link)
        if chain.broken:
            return None
        if chain.slot is None:
            chain.slot = asyncio.ensure_future(pick())
            chain.slot.add_done_callback(lambda f: self._picked(chain, f))
        return await asyncio.shield(chain.slot)

    def _picked(self, chain: _Chain, fut: asyncio.Future[WorkerSlot]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            chain.slot = None  # the next call picks again
            return
        for link in chain.unsent:
            self._notify(fut.result(), link)
        chain.unsent.clear()

    async def here(
        self, link: Link | None, signal: AbortSignal, run: Callable[[], Awaitable[_T]]
    ) -> _T:
        """Run a call in the executor: a linked one in its turn, then its place has ended."""
        if link is None:
            return await run()
        try:
            await self.turn(link, signal)
            return await run()
        finally:
            self.ended(link, tell_worker=True)

    async def sealed(self, link: Link) -> bool:
        """After an abort: whether the worker had begun a later stage when it heard of it.

        Asked once per chain; when nobody can say, ``False`` (the usual rule applies).
        """
        chain = self._chains.get(link.chain) or self._done.get(link.chain)
        if chain is None:
            return False
        if chain.frontier is None:
            fut = chain.slot
            if chain.broken or fut is None or not fut.done() or fut.cancelled() or fut.exception():
                return False
            chain.frontier = asyncio.ensure_future(self._ask(fut.result(), link))
        try:
            return link.position < await asyncio.shield(chain.frontier)
        except Exception:  # the worker is gone: nothing stands beyond the usual
            return False

    def broken(self, link: Link) -> None:
        """The chain's worker cannot take its calls: the rest go out unlinked, in turn."""
        self._of(link).broken = True

    async def turn(self, link: Link, signal: AbortSignal) -> None:
        """Wait here until every place of the earlier stages has ended."""
        chain = self._of(link)
        if chain.ended.low >= link.stage_start:
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        chain.turns[fut] = link.stage_start
        remove = signal.add_listener(lambda: loop.call_soon_threadsafe(_wake, fut))
        try:
            await fut
        finally:
            remove()
        if chain.ended.low < link.stage_start:  # the signal fired first: it never starts
            raise AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)

    def ended(self, link: Link, *, tell_worker: bool) -> None:
        """The call at ``link`` is over (``tell_worker``: the chain's worker did not run it)."""
        chain = self._of(link)
        if tell_worker:
            fut = chain.slot
            if fut is not None and fut.done() and not fut.cancelled() and not fut.exception():
                self._notify(fut.result(), link)
            else:
                chain.unsent.append(link)
        chain.ended.mark(link.position)
        low = chain.ended.low
        for turn in [t for t, start in chain.turns.items() if start <= low]:
            del chain.turns[turn]
            _wake(turn)
        if low >= chain.size:  # kept a while: a late commit may still ask where it was
            self._done[link.chain] = self._chains.pop(link.chain)
            while len(self._done) > _DONE:
                self._done.popitem(last=False)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
