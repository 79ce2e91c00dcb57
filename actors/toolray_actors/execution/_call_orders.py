"""The calls a worker's call processes hold, and the orders its control lane gives them.

The control lane (another thread, with its own loop) aborts, interrupts and kills calls by
token while the worker's loop runs them. :class:`CallOrders` is that thread-safe meeting
point: a call arrives (its early orders — an abort or a kill that came first — go with
it), the lane's orders reach it through its owner, on the owner's loop, and it leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from toolray.isolation import AbortCall, CallOutcome, InterruptCall, ProcessLink

__all__ = ("KILLED", "KILLED_EARLY", "Call", "CallOrders", "OrderTaker", "settle")

KILLED_EARLY = CallOutcome(status="killed", detail="killed before it started")
KILLED = CallOutcome(status="killed", detail="killed on request")
_MAX_EARLY = 4096
_KILL = object()  # among a call's early orders: its kill came first (it never starts)


@dataclass(eq=False)
class Call:
    """One call on its way through a worker's call processes."""

    token: str
    key: str
    arguments: object
    ident: Mapping[str, object]
    done: asyncio.Future[CallOutcome]
    aborts: list[object] = field(default_factory=list)
    queued: float = 0.0
    proc: ProcessLink | None = None
    coded: bool = False  # its code went with it: a process that still misses it broke down
    overdue: Callable[[], None] | None = None  # tells its executor its body ran its budget
    expiry: asyncio.TimerHandle | None = None  # its max_queue_s, then its body's backstop

    def settled(self) -> bool:
        """Whether its outcome is set."""
        return self.done.done()


def settle(call: Call, outcome: CallOutcome) -> None:
    """Set ``call``'s outcome (the first one stands)."""
    if not call.done.done():
        call.done.set_result(outcome)


class OrderTaker(Protocol):
    """What the orders need of their owner (on its loop)."""

    def forward(self, call: Call, message: AbortCall | InterruptCall) -> None:
        """Send ``message`` to the call's process (or stop a call that waits for one)."""
        ...

    def killed_now(self, call: Call) -> None:
        """``call``'s process was killed on request: it ends now."""
        ...


class CallOrders:
    """The calls here, by token, and the control lane's orders for them (thread-safe)."""

    def __init__(self, owner: OrderTaker) -> None:
        self._owner = owner
        self._lock = threading.Lock()
        self._calls: dict[str, Call] = {}
        self._early: OrderedDict[str, list[object]] = OrderedDict()
        self.loop: asyncio.AbstractEventLoop | None = None

    def __len__(self) -> int:
        return len(self._calls)

    def arrive(self, call: Call) -> bool:
        """``call`` is here, with the orders that came first; ``False``: it was killed."""
        with self._lock:
            call.aborts = self._early.pop(call.token, [])
            if _KILL in call.aborts:
                return False
            self._calls[call.token] = call
            return True

    def leave(self, token: str) -> None:
        """The call of ``token`` settled."""
        with self._lock:
            self._calls.pop(token, None)

    def running(self, proc: ProcessLink, call: Call | None) -> None:
        """``proc`` now runs ``call`` (``None``: it is free); a kill from now on finds it."""
        with self._lock:
            proc.call = call
            if call is not None:
                call.proc = proc

    def finished(self, proc: ProcessLink, *, keep: bool) -> bool:
        """``proc`` reported its call's end; ``False`` if its kill came first (that stands).

        Unless ``keep`` (it runs the call again), a late kill of the call misses ``proc``.
        """
        with self._lock:
            if proc.killed:
                return False
            if not keep:
                proc.call = None
            return True

    def abort(self, token: str, reason: object) -> bool:
        """Forward an abort to the call's process (remembered if the call is not here yet)."""
        with self._lock:
            call = self._calls.get(token)
            if call is None:
                self._remember(token, reason)
                return False
        self._on_loop(self._owner.forward, call, AbortCall(token=token, reason=reason))
        return True

    def _remember(self, token: str, order: object) -> None:  # the lock is held
        self._early.setdefault(token, []).append(order)
        if len(self._early) > _MAX_EARLY:
            self._early.popitem(last=False)

    def interrupt(self, token: str) -> str:
        """Forward an interrupt; a call still waiting for a process stops at once."""
        with self._lock:
            call = self._calls.get(token)
        if call is None or call.done.done():
            return "gone"
        self._on_loop(self._owner.forward, call, InterruptCall(token=token))
        return "forwarded"

    def kill(self, token: str) -> bool:
        """Kill the call's process group (its call fails ``killed``); ``False`` if gone."""
        with self._lock:
            call = self._calls.get(token)
            if call is None:  # not here yet (or settled): a later arrival never starts
                self._remember(token, _KILL)
                return False
            proc = call.proc
            if proc is not None and proc.call is call:
                proc.killed = True
                proc.signal_kill()  # final: the call ends now, not at its end of file
                self._on_loop(self._owner.killed_now, call)
                return True
        if proc is not None:
            return False  # settled already
        self._on_loop(settle, call, KILLED_EARLY)
        return True

    def _on_loop(self, fn: Callable[..., object], *args: object) -> None:
        if self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the worker is going
                self.loop.call_soon_threadsafe(fn, *args)
