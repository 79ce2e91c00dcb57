"""Farm metrics through ``ray.util.metrics``: Ray's Prometheus endpoint and its dashboard.

Ray exports them with its ``ray_`` prefix, per process (a ``WorkerId`` label), on every
node's metrics port. Tags are bounded: the tool name (at most 256 per executor) and the
outcome, or the pool key — never a scope or a call id.

- ``toolray_calls_total{tool,outcome}`` — calls that ended (``outcome``: ``ok`` or the code);
- ``toolray_call_duration_seconds{tool}`` — call latency, start to final result;
- ``toolray_calls_in_flight{tool}`` — calls started and not ended, per executor;
- ``toolray_worker_kills_total{pool}`` — the cancellation ladder's kills (a worker actor,
  or a call's own process);
- ``toolray_pool_workers{pool}`` — the pool's live worker actors;
- ``toolray_environment_events_total{environment,event}`` — environment instances opened,
  forked, parked, restored, lost and closed;
- ``toolray_environment_instances{state}`` — instances open, parked and lost, per executor.

An executor hands over what it counted about once a second (:class:`CallMetrics`), so a
call costs a list append, not a metrics update: Ray exports on an interval of its own
anyway. Ray exports a gauge's value once after it is set and then drops it, so the gauges
are set again on every flush (the pool's too, by the pool manager), changed or not.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, final

from ray.util import metrics

from toolray_actors._farm_stats import FarmObserver
from toolray_actors._remote import actor_name

__all__ = ("CallMetrics", "EnvMetrics", "PoolMetrics", "flush_every", "pool_tag")

DURATION_BOUNDARIES = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
)
"""The duration histogram's bucket bounds, in seconds."""

_GAUGE_S = 1.0
"""How often a pool's size gauge is set again (Ray drops a gauge value once exported)."""


@final
class CallMetrics:
    """The call metrics of one executor actor, fed from its :class:`FarmObserver`."""

    def __init__(self) -> None:
        self.calls = metrics.Counter(
            "toolray_calls_total",
            description="Tool calls that ended, by tool and outcome (ok or the failure code).",
            tag_keys=("tool", "outcome"),
        )
        self.duration = metrics.Histogram(
            "toolray_call_duration_seconds",
            description="Tool call latency, from start to final result, by tool.",
            boundaries=list(DURATION_BOUNDARIES),
            tag_keys=("tool",),
        )
        self.in_flight = metrics.Gauge(
            "toolray_calls_in_flight",
            description="Tool calls started and not ended, by tool (per executor actor).",
            tag_keys=("tool",),
        )

    def flush(self, observer: FarmObserver) -> None:
        """Hand over every call ended since the last flush, and the in-flight counts."""
        pending, observer.pending = observer.pending, []
        totals: dict[tuple[str, str], int] = {}
        for tool, outcome, seconds in pending:
            totals[tool, outcome] = totals.get((tool, outcome), 0) + 1
            self.duration.observe(seconds, tags={"tool": tool})
        for (tool, outcome), n in totals.items():
            self.calls.inc(n, tags={"tool": tool, "outcome": outcome})
        for tool, n in observer.in_flight().items():  # every time: Ray drops exported ones
            self.in_flight.set(n, tags={"tool": tool})


@final
class EnvMetrics:
    """An executor's environment metrics: events as they come, instances by state."""

    def __init__(self) -> None:
        self.events = metrics.Counter(
            "toolray_environment_events_total",
            description="Environment instances opened, forked, parked, restored, lost, closed.",
            tag_keys=("environment", "event"),
        )
        self.instances = metrics.Gauge(
            "toolray_environment_instances",
            description="Environment instances by state (open, parked, lost), per executor.",
            tag_keys=("state",),
        )
        self.pending: list[tuple[str, str]] = []

    def flush(self, open_: int, parked: int, lost: int) -> None:
        """Hand over the events since the last flush, and the instances by state."""
        pending, self.pending = self.pending, []
        totals: dict[tuple[str, str], int] = {}
        for environment, event in pending:
            totals[environment, event] = totals.get((environment, event), 0) + 1
        for (environment, event), n in totals.items():
            self.events.inc(n, tags={"environment": environment, "event": event})
        for state, n in (("open", open_), ("parked", parked), ("lost", lost)):
            self.instances.set(n, tags={"state": state})


@final
class PoolMetrics:
    """The pool metrics: kills (counted by the executor whose ladder killed) and the size.

    A pool manager passes ``members`` (its live worker count): :meth:`resized` sets the
    size gauge, and from the first time on it is set again every second.
    """

    def __init__(self, members: Callable[[], int] | None = None) -> None:
        self.kills = metrics.Counter(
            "toolray_worker_kills_total",
            description="Kills by the cancellation ladder (a worker actor, or a call's process).",
            tag_keys=("pool",),
        )
        self.workers = metrics.Gauge(
            "toolray_pool_workers",
            description="Live worker actors of the pool.",
            tag_keys=("pool",),
        )
        self._members = members
        self._tag = pool_tag() if members is not None else ""
        self._again: asyncio.Task[None] | None = None

    def killed(self, pool: str) -> None:
        """One kill in ``pool``."""
        self.kills.inc(1, tags={"pool": pool})

    def resized(self) -> None:
        """Set the size gauge now (a pool manager's, in its event loop)."""
        if self._members is None:
            return
        self.workers.set(self._members(), tags={"pool": self._tag})
        if self._again is None:
            self._again = asyncio.ensure_future(flush_every(_GAUGE_S, self.resized))

    def stop(self) -> None:
        """No more setting the size gauge again."""
        if self._again is not None:
            self._again.cancel()


def pool_tag() -> str:
    """The ``pool`` tag of the pool manager actor calling this (its placement key)."""
    try:
        name = actor_name()
    except Exception:  # not in an actor (a unit test): an untagged pool
        name = ""
    return name.removeprefix("toolray:pool:")


async def flush_every(seconds: float, flush: Any) -> None:
    """Call ``flush()`` every ``seconds`` until cancelled (a failing flush is skipped)."""
    while True:
        await asyncio.sleep(seconds)
        with contextlib.suppress(Exception):
            flush()
