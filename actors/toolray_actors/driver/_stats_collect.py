"""``rt.stats()``: ask every live actor of the namespace for its record, concurrently.

:func:`gather` asks (pools, executors, the registry — each once, at the same time);
:func:`collect_stats` sums the answers into ``RuntimeStats``; ``toolray top`` reads the
same answers in more detail.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from toolray_actors._farm_stats import merge_tools, total_counts
from toolray_actors._handles import get_named, named_actors
from toolray_actors._remote import send
from toolray_actors._stats import ActorStats, PoolStats, RuntimeStats
from toolray_actors.control._bucket_actor import BucketActor
from toolray_actors.control._registry_actor import RegistryActor
from toolray_actors.execution._executor_actor import ExecutorActor, ExecutorStats
from toolray_actors.execution._pool import PoolManager

from ._connection import Connection

__all__ = ("Gathered", "collect_stats", "gather")

_TIMEOUT_S = 10.0


async def _ask(ref: Any) -> Any:
    try:
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), _TIMEOUT_S)
    except Exception:  # an actor that died or is busy starting: left out of the snapshot
        return None


@dataclass(slots=True, kw_only=True)
class Gathered:
    """What every live actor of a namespace answered (an actor that did not is left out)."""

    namespace: str
    pools: list[tuple[str, PoolStats]] = field(default_factory=list)
    """``(pool manager name, its stats)``."""
    executors: list[tuple[str, ExecutorStats]] = field(default_factory=list)
    executor_names: list[str] = field(default_factory=list)
    """Every executor actor found (answering or not)."""
    actors: list[ActorStats] = field(default_factory=list)
    """The registry first, then each pool manager with its workers, then the executors."""
    registry_info: dict[str, Any] = field(default_factory=dict)
    retired: ExecutorStats | None = None
    """What the namespace's exited executors counted (the registry keeps it)."""

    def counted(self) -> list[ExecutorStats]:
        """Every live executor's record, and the exited ones' sum: the namespace's totals."""
        live = [st for _, st in self.executors]
        return live if self.retired is None else [*live, self.retired]


async def gather(namespace: str) -> Gathered:
    """Ask every live actor of ``namespace`` at once."""
    names = await asyncio.to_thread(named_actors, namespace)
    handles = {n: h for n in names if (h := get_named(n, namespace)) is not None}
    pools = [n for n in handles if n.startswith("toolray:pool:")]
    executors = [n for n in handles if n.startswith("toolray:executor:")]
    buckets = [n for n in handles if n.startswith("toolray:bucket:")]
    asks: list[Any] = []
    for name in pools:
        pool = handles[name]
        asks.append(_ask(send(pool, PoolManager.actor_stats, name)))
        asks.append(_ask(send(pool, PoolManager.stats, name.removeprefix("toolray:pool:"))))
    for name in executors:
        asks.append(_ask(send(handles[name], ExecutorActor.actor_stats)))
        asks.append(_ask(send(handles[name], ExecutorActor.statistics)))
    asks.extend(_ask(send(handles[name], BucketActor.actor_stats)) for name in buckets)
    registry = handles.get("toolray:registry")
    if registry is not None:
        asks.append(_ask(send(registry, RegistryActor.actor_stats)))
        asks.append(_ask(send(registry, RegistryActor.info)))
        asks.append(_ask(send(registry, RegistryActor.retired)))
    answers = iter(await asyncio.gather(*asks))
    found = Gathered(namespace=namespace, executor_names=executors)
    for name in pools:
        members, st = next(answers), next(answers)
        found.actors.extend(members or ())
        if st is not None:
            found.pools.append((name, st))
    for name in executors:
        own, st = next(answers), next(answers)
        if own is not None:
            found.actors.append(own)
        if st is not None:
            found.executors.append((name, st))
    for _ in buckets:
        bucket = next(answers)
        if bucket is not None:
            found.actors.append(bucket)
    if registry is not None:
        own, info, found.retired = next(answers), next(answers), next(answers)
        if own is not None:
            found.actors.insert(0, own)
        found.registry_info = dict(info or {})
    return found


async def collect_stats(conn: Connection) -> RuntimeStats:
    """A snapshot of the namespace: every actor, pool counters and executor counters."""
    found = await gather(conn.namespace)
    pools = [st for _, st in found.pools]
    executors = found.counted()
    tools, _ = merge_tools(s for st in executors for s in st.tools)
    in_flight, waiting, waited = conn.admission.snapshot()
    return RuntimeStats(
        workers=sum(st.workers for st in pools),
        spares=sum(st.spares for st in pools),
        in_flight=sum(st.in_flight for st in executors),
        kills=sum(st.kills for st in executors),
        workers_lost=sum(st.workers_lost for st in executors),
        replacements=sum(st.replacements for st in pools),
        registry_restarts=int(found.registry_info.get("restarts", 0)),
        executors=tuple(found.executor_names),
        actors=tuple(found.actors),
        tools=tools,
        child_kills=sum(p.child_kills for p in pools),
        child_deaths=sum(p.child_deaths for p in pools),
        child_replacements=sum(p.child_replacements for p in pools),
        pools=tuple(pools),
        environments=total_counts(st.environments for st in executors),
        batches_in_flight=in_flight,
        batches_waiting=waiting,
        batches_waited=waited,
    )
