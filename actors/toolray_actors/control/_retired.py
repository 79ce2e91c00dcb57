"""What executor actors that have exited counted, kept by the registry actor.

An executor exits when it has been idle past its TTL or when its scope is disposed; the
calls, failures, kills and environment events it counted would leave ``rt.stats()`` with it,
and a namespace's totals would go back. Each exiting executor's last snapshot is added here
(a few counters and one latency sketch per tool, however many executors exit), and
``rt.stats()`` adds the sum to the live executors'.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from toolray.lowlevel import InstanceCounts
from toolray_actors._executor_wire import ExecutorStats
from toolray_actors._farm_stats import ToolSample
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


@dataclass(slots=True)
class _Tool:
    calls: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    buckets: dict[int, int] = field(default_factory=dict)


@dataclass(slots=True)
class Retired:
    """The sum of every exited executor's counters."""

    executors: int = 0
    kills: int = 0
    workers_lost: int = 0
    calls: int = 0
    tools: dict[str, _Tool] = field(default_factory=dict)
    environments: dict[str, int] = field(default_factory=dict)

    def add(self, last: ExecutorStats) -> None:
        """An executor's last snapshot, as it exits."""
        self.executors += 1
        self.kills += last.kills
        self.workers_lost += last.workers_lost
        self.calls += last.calls
        for sample in last.tools:
            into = self.tools.setdefault(sample.name, _Tool())
            into.calls += sample.calls
            for code, n in sample.failures.items():
                into.failures[code] = into.failures.get(code, 0) + n
            for index, n in sample.buckets.items():
                into.buckets[index] = into.buckets.get(index, 0) + n
        for f in dataclasses.fields(InstanceCounts):
            if f.name not in _GAUGES:
                n = getattr(last.environments, f.name)
                self.environments[f.name] = self.environments.get(f.name, 0) + n

    def stats(self) -> ExecutorStats:
        """The sum as one executor's record (nothing in flight, no pid, no scope)."""
        tools = tuple(
            ToolSample(
                name=name,
                calls=t.calls,
                in_flight=0,
                failures=dict(t.failures),
                buckets=dict(t.buckets),
                recent=0,
            )
            for name, t in sorted(self.tools.items())
        )
        return ExecutorStats(
            scope=None,
            pid=0,
            rss_bytes=0,
            batches=0,
            calls=self.calls,
            in_flight=0,
            aborts=0,
            interrupts=0,
            kills=self.kills,
            workers_lost=self.workers_lost,
            registry_seq=0,
            contributions=0,
            tools=tools,
            environments=InstanceCounts(**self.environments),
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
