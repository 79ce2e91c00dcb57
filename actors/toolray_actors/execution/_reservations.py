"""Batch ids an executor accepted before their batch came (``ExecutorActor.reserve``).

A driver without a ledger reserves a batch's id (or a single call's key), then sends the
batch. The reservation holds an ``AbortController`` in the actor's ``batches``, so an abort
that arrives first is kept — and, counted as work, it keeps the actor from exiting while
idle. A reservation whose batch never comes (its driver died between the two messages, or
the task awaiting the reservation was cancelled) would keep it forever: one that has waited
longer than the executor's idle TTL is dropped when the actor next checks whether it is
idle, so such an actor still exits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from toolray import AbortController

__all__ = ("Reservations",)


class Reservations:
    """The reserved ids of one executor actor whose batch has not started, with when."""

    def __init__(self, batches: dict[str, AbortController]) -> None:
        self.batches = batches
        """The actor's controllers by batch id (or call key): reserved, and running."""
        self._at: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._at)

    def reserve(self, batch_ids: Iterable[str], now: float) -> None:
        """Hold a controller for each id (an abort can come before its batch)."""
        for batch_id in batch_ids:
            self.batches.setdefault(batch_id, AbortController())
            self._at.setdefault(batch_id, now)

    def claim(self, batch_id: str, aborted: bool = False, reason: Any = None) -> AbortController:
        """``batch_id``'s batch (or call) came: its controller (the reservation's, if any).

        ``aborted``: the driver aborted it before sending it (``reason``): the controller is.
        """
        self._at.pop(batch_id, None)
        ctrl = self.batches.setdefault(batch_id, AbortController())
        if aborted:
            ctrl.abort(reason)
        return ctrl

    def drop_expired(self, now: float, ttl_s: float) -> list[str]:
        """Forget the reservations older than ``ttl_s`` whose batch never came."""
        expired = [batch_id for batch_id, at in self._at.items() if now - at >= ttl_s]
        for batch_id in expired:
            del self._at[batch_id]
            self.batches.pop(batch_id, None)
        return expired
