"""``rt.stats()``: ask every live actor of the namespace for its record, concurrently."""

from __future__ import annotations

import asyncio
from typing import Any

from ._connection import Connection
from ._handles import get_named, named_actors
from ._stats import ActorStats, PoolStats, RuntimeStats

__all__ = ("collect_stats",)

_TIMEOUT_S = 10.0


async def _ask(ref: Any) -> Any:
    try:
        return await asyncio.wait_for(asyncio.wrap_future(ref.future()), _TIMEOUT_S)
    except Exception:  # an actor that died or is busy starting: left out of the snapshot
        return None


async def collect_stats(conn: Connection) -> RuntimeStats:
    """A snapshot of the namespace: every actor, pool counters and executor counters."""
    ns = conn.namespace
    names = await asyncio.to_thread(named_actors, ns)
    handles = {n: h for n in names if (h := get_named(n, ns)) is not None}
    pools = [n for n in handles if n.startswith("toolray:pool:")]
    executors = [n for n in handles if n.startswith("toolray:executor:")]
    asks: list[Any] = []
    for name in pools:
        asks.append(_ask(handles[name].actor_stats.remote(name)))
        asks.append(_ask(handles[name].stats.remote(name)))
    for name in executors:
        asks.append(_ask(handles[name].actor_stats.remote()))
        asks.append(_ask(handles[name].statistics.remote()))
    registry = handles.get("toolray:registry")
    if registry is not None:
        asks.append(_ask(registry.actor_stats.remote()))
        asks.append(_ask(registry.info.remote()))
    answers = await asyncio.gather(*asks)
    actors: list[ActorStats] = []
    workers = spares = replacements = in_flight = kills = lost = restarts = 0
    pool_stats: list[PoolStats] = []
    pairs = iter(answers)
    for _ in pools:
        members, st = next(pairs), next(pairs)
        actors.extend(members or ())
        if st is not None:
            workers, spares = workers + st.workers, spares + st.spares
            replacements += st.replacements
            pool_stats.append(st)
    for _ in executors:
        own, st = next(pairs), next(pairs)
        if own is not None:
            actors.append(own)
        if st is not None:
            in_flight, kills, lost = (
                in_flight + st.in_flight,
                kills + st.kills,
                lost + st.workers_lost,
            )
    if registry is not None:
        own, info = next(pairs), next(pairs)
        if own is not None:
            actors.insert(0, own)
        restarts = int((info or {}).get("restarts", 0))
    return RuntimeStats(
        workers=workers,
        spares=spares,
        in_flight=in_flight,
        kills=kills,
        workers_lost=lost,
        replacements=replacements,
        registry_restarts=restarts,
        executors=tuple(executors),
        actors=tuple(actors),
        child_kills=sum(p.child_kills for p in pool_stats),
        child_deaths=sum(p.child_deaths for p in pool_stats),
        child_replacements=sum(p.child_replacements for p in pool_stats),
        pools=tuple(pool_stats),
    )
