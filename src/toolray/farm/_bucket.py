"""A token bucket as a schedule: when each token may be used (GCRA), pure and clock-free.

Each token gets a *slot*, the earliest time its call may start. With ``I = 1 / per_second``
and a tolerance of ``(burst - 1) × I``, slots are handed out so that any interval of length
``T`` holds at most ``per_second × T + burst`` of them, whoever asks and however the
requests interleave. The same schedule runs in-process (one per registry and tool) and in
the Ray layer's bucket actor (one per namespace and tool), which hands slots out in leases.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._values import RateLimit

__all__ = ("Reservation", "TokenSchedule")


@dataclass(frozen=True, slots=True, kw_only=True)
class Reservation:
    """The answer to one request: the slots granted, and when the next token is free.

    ``slots`` are absolute times (in the schedule's clock), one per granted token, in order;
    fewer than asked when the next slot lies past ``latest``. ``next_slot`` is the slot the
    next token would get.
    """

    slots: tuple[float, ...]
    next_slot: float


class TokenSchedule:
    """One bucket's state: the theoretical arrival time of the next token (GCRA)."""

    __slots__ = ("_interval", "_last", "_tat", "_tolerance", "limit")

    def __init__(self, limit: RateLimit, now: float, *, full: bool = True) -> None:
        self.limit = limit
        self._interval = 1.0 / limit.per_second
        self._tolerance = (limit.burst - 1) * self._interval
        # full: every one of the burst's tokens is free now; empty: the first one is free
        # now and the rest refill at the rate (a restarted bucket must not add a burst)
        self._tat = now if full else now + self._tolerance
        self._last: tuple[float, float] | None = None  # (last slot, the state before it)

    def retune(self, limit: RateLimit) -> None:
        """Adopt a changed limit, keeping what was already handed out."""
        if limit == self.limit:
            return
        self.limit = limit
        self._interval = 1.0 / limit.per_second
        self._tolerance = (limit.burst - 1) * self._interval

    def next_slot(self, now: float) -> float:
        """The slot the next token would get, asked at ``now``."""
        return max(now, self._tat - self._tolerance)

    def reserve(self, now: float, count: int, latest: float) -> Reservation:
        """Hand out up to ``count`` slots, none later than ``latest``."""
        slots: list[float] = []
        for _ in range(count):
            slot = self.next_slot(now)
            if slot > latest:
                break
            self._last = (slot, self._tat)
            self._tat = max(self._tat, slot) + self._interval
            slots.append(slot)
        return Reservation(slots=tuple(slots), next_slot=self.next_slot(now))

    def refund(self, slot: float) -> bool:
        """Give back the latest slot handed out, if ``slot`` is it (an aborted waiter)."""
        last = self._last
        if last is None or last[0] != slot:
            return False
        self._tat, self._last = last[1], None
        return True
