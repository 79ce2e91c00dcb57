"""A worker's chain gates: a chain's calls start in model order, stage after stage.

An executor sends a batch whose order nobody can observe as one *chain* (``Link`` on each
request, see ``toolray.lowlevel.ChainRunner``): every call of it comes to this worker at once,
and the gate holds each until its turn — every call of the earlier stages has ended, every
earlier call of its own stage has started, and fewer than its stage's cap are running. An
exclusive call is a stage of one with a cap of one: it runs alone, as a barrier.

A place counts as ended when its call ends here, when the executor says its call will not
come (:meth:`ChainGates.done`), or when an abort reaches it while it waits (it never starts,
:data:`UNSTARTED`). A call answered ``missing`` or ``retired`` gives its place back: the
executor sends it again.

The calls of a chain share one signal: an abort of any of them stops the whole chain (no
held call starts). Where it found the chain matters to the executor: a call whose stage was
over by then would, stage by stage, have committed before the next stage started, so its
success must stand (:meth:`ChainGates.seal`).

The gates live on the worker's loop; aborts come from the control lane (another thread)
and cross to it through :meth:`ChainGates.abort`.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from toolray import AbortError
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH
from toolray.isolation import CallOutcome, error_data
from toolray.lowlevel import Link

__all__ = ("UNSTARTED", "ChainGates", "Places")

UNSTARTED = CallOutcome(
    status="error",
    error=error_data(AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)),
)
"""A chained call aborted while it waited for its turn: its body never ran."""

_EARLY = 4096
"""Tokens remembered as aborted before their request came (the oldest are forgotten)."""


class Places:
    """Places of a chain marked so far (begun, or ended).

    Every place before ``low`` is marked; a mark above it is kept until ``low`` passes it.
    """

    __slots__ = ("_above", "low")

    def __init__(self) -> None:
        self.low = 0
        self._above: set[int] = set()

    def mark(self, position: int) -> None:
        """``position`` is marked (again: nothing changes)."""
        if position >= self.low:
            self._above.add(position)
            while self.low in self._above:
                self._above.remove(self.low)
                self.low += 1

    def unmark(self, position: int) -> None:
        """``position`` is no longer marked (the places between it and ``low`` still are)."""
        if position < self.low:
            self._above.update(range(position + 1, self.low))
            self.low = position
        else:
            self._above.discard(position)


@dataclass(frozen=True, slots=True)
class _Held:
    """A call waiting for its turn."""

    link: Link
    turn: asyncio.Future[bool]


@dataclass(eq=False)
class _Gate:
    """One chain's progress on this worker."""

    chain: str
    size: int
    ended: Places = field(default_factory=Places)
    begun: Places = field(default_factory=Places)  # ended places count as begun
    running: int = 0
    frontier: int = 0  # the first place of the latest stage begun
    aborted: bool = False  # no call of it starts any more
    sealed_below: int = 0  # the frontier when it was aborted
    waiting: dict[int, _Held] = field(default_factory=dict)

    def may_begin(self, link: Link) -> bool:
        return (
            self.ended.low >= link.stage_start
            and self.begun.low == link.position
            and self.running < link.cap
        )

    def begin(self, link: Link) -> None:
        self.frontier = max(self.frontier, link.stage_start)
        self.begun.mark(link.position)
        self.running += 1

    def end(self, position: int) -> None:
        self.begun.mark(position)
        self.ended.mark(position)

    def wake(self) -> None:
        """Start every waiting call whose turn it is (the next place, while the cap allows)."""
        while (head := self.waiting.get(self.begun.low)) is not None and self.may_begin(head.link):
            del self.waiting[self.begun.low]
            self.begin(head.link)
            head.turn.set_result(True)


class ChainGates:
    """The gates of every chain with calls on this worker."""

    def __init__(self) -> None:
        self._gates: dict[str, _Gate] = {}
        self._lock = threading.Lock()  # guards the maps the control lane reads
        self._chain_of: dict[str, str] = {}  # token → chain of a held or running call
        self._held: set[str] = set()
        self._early: OrderedDict[str, None] = OrderedDict()
        self._finished: OrderedDict[str, int] = OrderedDict()  # ended chains → first unsealed
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def held(self) -> int:
        """Calls waiting for their turn."""
        return len(self._held)

    def _gate(self, link: Link) -> _Gate:
        gate = self._gates.get(link.chain)
        if gate is None:
            gate = self._gates[link.chain] = _Gate(link.chain, link.size)
        return gate

    async def enter(self, token: str, link: Link) -> bool:
        """Wait for the call's turn; ``False``: it was aborted first and must not start."""
        loop = self._loop = asyncio.get_running_loop()
        gate = self._gate(link)
        with self._lock:
            early = self._early.pop(token, False) is None or gate.aborted  # None: it was kept
            if not early:
                self._chain_of[token] = link.chain
                if not gate.may_begin(link):
                    self._held.add(token)
        if early:
            self._ended(gate, link.position)
            return False
        if token not in self._held:
            gate.begin(link)
            return True
        fut: asyncio.Future[bool] = loop.create_future()
        gate.waiting[link.position] = _Held(link, fut)
        try:
            if await fut:
                return True
        except asyncio.CancelledError:  # its message was abandoned: it never starts
            if gate.waiting.pop(link.position, None) is not None:
                self._ended(gate, link.position)
            self._forget(token)
            raise
        finally:
            with self._lock:
                self._held.discard(token)
        self._forget(token)
        return False

    def leave(self, token: str, link: Link, *, ended: bool) -> None:
        """A call that began is over (``ended=False``: not run; it will be sent again)."""
        self._forget(token)
        gate = self._gates.get(link.chain)
        if gate is None:
            return
        gate.running -= 1
        if ended:
            self._ended(gate, link.position)
            return
        gate.begun.unmark(link.position)
        gate.wake()

    def done(self, link: Link) -> None:
        """The executor's word: the call at ``link`` will not come (or ended elsewhere)."""
        gate = self._gate(link)
        held = gate.waiting.pop(link.position, None)
        if held is not None:
            held.turn.set_result(False)
        self._ended(gate, link.position)

    def abort(self, token: str) -> bool:
        """From any thread: the call's chain starts nothing more (its calls share a signal).

        ``True`` if this call was held (it never starts); an unknown token is kept for its
        request.
        """
        with self._lock:
            chain = self._chain_of.get(token)
            if chain is None:
                self._early[token] = None
                while len(self._early) > _EARLY:
                    self._early.popitem(last=False)
                return False
            held = token in self._held
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._abort_chain, chain)
        return held

    def seal(self, link: Link) -> int:
        """Stop ``link``'s chain (if an abort has not yet): the first place not sealed.

        A call before that place was in a stage over when the chain stopped: stage by stage
        it would have committed before a later call started, so its success stands.
        """
        if (sealed := self._finished.get(link.chain)) is not None:
            return sealed
        gate = self._gate(link)
        self._abort_chain(link.chain)
        return gate.sealed_below

    def _abort_chain(self, chain: str) -> None:
        gate = self._gates.get(chain)
        if gate is None or gate.aborted:
            return
        gate.aborted = True
        gate.sealed_below = gate.frontier
        for position in sorted(gate.waiting):
            gate.waiting.pop(position).turn.set_result(False)
            gate.end(position)
        if gate.ended.low >= gate.size:
            self._finish(gate)

    def _forget(self, token: str) -> None:
        with self._lock:
            self._chain_of.pop(token, None)

    def _ended(self, gate: _Gate, position: int) -> None:
        gate.end(position)
        if gate.ended.low >= gate.size:
            self._finish(gate)
            return
        gate.wake()

    def _finish(self, gate: _Gate) -> None:
        self._gates.pop(gate.chain, None)
        self._finished[gate.chain] = gate.sealed_below if gate.aborted else gate.size
        while len(self._finished) > _EARLY:
            self._finished.popitem(last=False)
