"""``BucketActor``: one rate-limited tool's token bucket, shared by the whole namespace.

One named actor per tool (``toolray:bucket:<tool>``), on the control nodes, started by the
first executor that needs it and restarted by Ray if it dies. It keeps the tool's
:class:`~toolray.farm.TokenSchedule` and hands out *leases*: the slots of several waiting
calls at once, as delays from now, so a call never pays a round trip of its own and an
executor asks once for all its waiting calls of a tool. Slots are handed out at most
:data:`HORIZON_S` ahead; a call whose slot lies further is asked for again later.

A restarted bucket does not know the slots its previous incarnation handed out, and those
lie at most :data:`HORIZON_S` ahead. So it starts *empty* and gives out its first slot one
horizon after its start: the leases of both incarnations together never exceed the limit
by more than one burst.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from toolray.farm import RateLimit, TokenSchedule, latest_slot
from toolray_actors._stats import ActorStats, actor_stats

__all__ = ("HORIZON_S", "BucketActor", "Lease")

HORIZON_S = 1.0
"""How far ahead a bucket hands out slots."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """Slots for waiting calls, as seconds from when the bucket answered.

    ``delays`` has one entry per granted token, in order (fewer than asked when the next
    slot lies past the horizon or past the calls' ``max_wait_ms``); ``next_delay`` is when
    the next token would be free.
    """

    delays: tuple[float, ...]
    next_delay: float


class BucketActor:
    """The token bucket of one tool (see the module docstring)."""

    def __init__(self, tool: str, restarted: bool = False) -> None:
        self.tool = tool
        self.restarted = restarted
        self.started = time.monotonic()
        self.schedule: TokenSchedule | None = None
        self.granted = 0

    def _schedule(self, limit: RateLimit, now: float) -> TokenSchedule:
        if self.schedule is None:
            if self.restarted:  # empty, and nothing before one horizon has passed
                self.schedule = TokenSchedule(limit, self.started + HORIZON_S, full=False)
            else:
                self.schedule = TokenSchedule(limit, now)
        else:
            self.schedule.retune(limit)
        return self.schedule

    async def lease(self, count: int, limit: RateLimit) -> Lease:
        """Slots for up to ``count`` calls under ``limit`` (the latest limit wins)."""
        now = time.monotonic()
        schedule = self._schedule(limit, now)
        latest = min(latest_slot(now, limit), now + HORIZON_S)
        answer = schedule.reserve(now, max(0, count), latest)
        self.granted += len(answer.slots)
        return Lease(
            delays=tuple(max(0.0, slot - now) for slot in answer.slots),
            next_delay=max(0.0, answer.next_slot - now),
        )

    async def stats(self) -> dict[str, object]:
        """What the bucket handed out, and whether it is a restarted incarnation."""
        return {"tool": self.tool, "granted": self.granted, "restarted": self.restarted}

    async def actor_stats(self) -> ActorStats:
        """This actor's identity and footprint (``rt.stats().actors``)."""
        return actor_stats("bucket", f"toolray:bucket:{self.tool}", 0)

    async def ping(self) -> int:
        """Liveness."""
        return 1
