"""What executor actors that have exited counted, kept by the registry actor.

An executor exits when it has been idle past its TTL or when its scope is disposed; the
calls, failures, kills and environment events it counted would leave ``rt.stats()`` with it,
and a namespace's totals would go back. Each exiting executor's last snapshot is added here
(a few counters and one latency sketch per tool, however many executors exit), and
``rt.stats()`` adds the sum to the live executors'.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from toolray_actors._executor_wire import ExecutorStats
from toolray_actors._farm_stats import sum_samples, total_counts
from toolray_actors._handles import get_named, kill
from toolray_actors._remote import send

__all__ = ("Retired",)

_log = logging.getLogger("toolray")
_ASK_S = 2.0

_GAUGES = ("open", "parked", "lost")
"""Instance states: an exited executor holds none (only its lifecycle events stay)."""


class _Exiting(Protocol):
    """``ExecutorActor.retire``, named here: the executor's module imports the registry's."""

    async def retire(self) -> ExecutorStats:
        """Take no more work; the last counters."""
        ...


def _nothing() -> ExecutorStats:
    return ExecutorStats(
        scope=None,
        pid=0,
        rss_bytes=0,
        batches=0,
        calls=0,
        in_flight=0,
        aborts=0,
        interrupts=0,
        kills=0,
        workers_lost=0,
        registry_seq=0,
        contributions=0,
    )


@dataclass(slots=True)
class Retired:
    """The sum of every exited executor's counters."""

    total: ExecutorStats = field(default_factory=_nothing)
    """As one executor's record: nothing in flight, no pid, no scope, no instance held."""

    def add(self, last: ExecutorStats) -> None:
        """An executor's last snapshot, as it exits."""
        t = self.total
        ended = (replace(s, in_flight=0, recent=0) for s in last.tools)
        self.total = replace(
            t,
            calls=t.calls + last.calls,
            kills=t.kills + last.kills,
            workers_lost=t.workers_lost + last.workers_lost,
            tools=sum_samples((*t.tools, *ended)),
            environments=total_counts(
                (t.environments, replace(last.environments, **dict.fromkeys(_GAUGES, 0)))
            ),
        )

    async def last_words(self, executor: Any) -> None:
        """Add what an executor about to be killed counted (``retire`` stops it taking work).

        An executor that does not answer in time is killed all the same, its counts lost.
        """
        try:
            self.add(await asyncio.wait_for(send(executor, _Exiting.retire), _ASK_S))
        except Exception:
            _log.debug("toolray: an exiting executor's counters were not read", exc_info=True)

    async def end(self, name: str, executors: dict[str, Any], namespace: str) -> None:
        """Kill executor ``name`` (its scope was disposed), keeping what it counted."""
        executors.pop(name, None)
        if (handle := get_named(name, namespace)) is not None:
            await self.last_words(handle)
            kill(handle)
