"""A worker's idle call processes, each fresh or bound to the one tool it has served.

A call process that ran a call may have been changed by its body (a patched module, a
thread, a file it left open): it is reused only for later calls of the **same tool
definition** (its worker cache key), never for another tool's — whichever scope or tenant
the calls come from (``Placement(reuse="tool")``, the default). With ``reuse="never"`` no
process takes a second call. A fresh process (forked and not yet used) takes any tool's.

Pure bookkeeping on the worker's loop: which idle process a call takes, and which goes
when room is needed. The processes themselves are the caller's.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Iterator
from typing import Generic, Literal, Protocol, TypeVar

T = TypeVar("T")

__all__ = ("REUSE_MODES", "IdleProcesses", "Reuse", "Waiters")

Reuse = Literal["tool", "never"]
REUSE_MODES: tuple[Reuse, ...] = ("tool", "never")


def _first(items: deque[T]) -> T:
    return next(iter(items))


class Idle(Protocol):
    """What the bookkeeping reads of a process."""

    bound: str | None
    """The tool (cache key) it ran a call of; ``None``: fresh."""
    idle_since: float
    known: set[str]


P = TypeVar("P", bound=Idle)


class IdleProcesses(Generic[P]):
    """Idle processes by the tool they are bound to (fresh ones apart), oldest first."""

    def __init__(self) -> None:
        self._fresh: deque[P] = deque()
        self._bound: dict[str, deque[P]] = {}

    def __len__(self) -> int:
        return len(self._fresh) + sum(len(group) for group in self._bound.values())

    def __iter__(self) -> Iterator[P]:
        yield from self._fresh
        for group in self._bound.values():
            yield from group

    def put(self, proc: P) -> None:
        """``proc`` waits for a call (of its tool, once bound)."""
        if proc.bound is None:
            self._fresh.append(proc)
        else:
            self._bound.setdefault(proc.bound, deque()).append(proc)

    def take(self, key: str) -> P | None:
        """The process for a call of ``key``: the latest bound to it, else a fresh one."""
        group = self._bound.get(key)
        if group:
            proc = group.pop()
            if not group:
                del self._bound[key]
            return proc
        return self._fresh.pop() if self._fresh else None

    def take_other(self, key: str) -> P | None:
        """The longest-idle process bound to a tool other than ``key`` (to make room)."""
        others = [k for k in self._bound if k != key]
        if not others:
            return None
        return self._pop_left(min(others, key=self._since))

    def _since(self, key: str) -> float:
        return _first(self._bound[key]).idle_since

    def _pop_left(self, key: str) -> P:
        group = self._bound[key]
        proc = group.popleft()
        if not group:
            del self._bound[key]
        return proc

    def remove(self, proc: P) -> bool:
        """Forget ``proc`` (it ended); ``False`` if it was not idle."""
        group = self._fresh if proc.bound is None else self._bound.get(proc.bound)
        if group is None or proc not in group:
            return False
        group.remove(proc)
        if proc.bound is not None and not group:
            del self._bound[proc.bound]
        return True

    def fresh_without(self, key: str) -> list[P]:
        """The fresh processes forked before ``key``'s code reached their template."""
        return [proc for proc in self._fresh if key not in proc.known]

    def ages(self) -> list[float]:
        """When each idle process became idle, oldest first."""
        return sorted(proc.idle_since for proc in self)

    def pop_oldest(self) -> P:
        """The longest-idle process, fresh or bound (the sizing lets it go)."""
        oldest = min(self._bound, key=self._since) if self._bound else None
        fresh = _first(self._fresh).idle_since if self._fresh else None
        if fresh is not None and (oldest is None or fresh <= self._since(oldest)):
            return self._fresh.popleft()
        assert oldest is not None, "no idle process"
        return self._pop_left(oldest)


class Waiting(Protocol):
    """What the bookkeeping reads of a call waiting for a process."""

    key: str
    queued: float

    def settled(self) -> bool:
        """Whether it ended while it waited (aborted, interrupted)."""
        ...


C = TypeVar("C", bound=Waiting)


class Waiters(Generic[C]):
    """Calls waiting for a process, oldest first (each takes one of its tool, or a fresh one)."""

    def __init__(self) -> None:
        self._calls: deque[C] = deque()

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, call: C) -> None:
        """``call`` waits (behind those before it)."""
        self._calls.append(call)

    def remove(self, call: C) -> None:
        """``call`` no longer waits (a no-op if it did not)."""
        with contextlib.suppress(ValueError):
            self._calls.remove(call)

    def head(self) -> C | None:
        """The longest-waiting call that has not settled (settled ones are dropped)."""
        while self._calls and _first(self._calls).settled():
            self._calls.popleft()
        return _first(self._calls) if self._calls else None

    def has(self, key: str | None) -> bool:
        """Whether a call of ``key`` waits (``None``: any call)."""
        return any(not c.settled() and key in (None, c.key) for c in self._calls)

    def take_for(self, bound: str | None) -> C | None:
        """The longest-waiting call a process bound to ``bound`` may run (``None``: any)."""
        for call in list(self._calls):
            if call.settled():
                self._calls.remove(call)
            elif bound is None or call.key == bound:
                self._calls.remove(call)
                return call
        return None

    def drain(self) -> list[C]:
        """Every waiting call, no longer waiting."""
        calls, self._calls = list(self._calls), deque()
        return calls
