"""``ActorDirectory`` without Ray: the scopes of one shard share one start of its actor."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray_actors.control._directory import ActorDirectory


class Starts:
    """A ``start`` callable that waits for the test's go and counts how often it ran."""

    def __init__(self) -> None:
        self.count = 0
        self.go = asyncio.Event()
        self.fail: BaseException | None = None

    async def __call__(self) -> Any:
        self.count += 1
        await self.go.wait()
        if self.fail is not None:
            raise self.fail
        return f"actor-{self.count}"


async def test_concurrent_first_callers_share_one_start() -> None:
    directory, start = ActorDirectory(), Starts()
    getters = [asyncio.ensure_future(directory.get("shard-0", start)) for _ in range(50)]
    await asyncio.sleep(0)
    start.go.set()
    assert set(await asyncio.gather(*getters)) == {"actor-1"}
    assert start.count == 1
    assert await directory.get("shard-0", start) == "actor-1"  # known ready: no start


async def test_a_failed_start_fails_its_waiters_and_the_next_call_starts_again() -> None:
    directory, start = ActorDirectory(), Starts()
    start.fail = LookupError("no such actor")
    getters = [asyncio.ensure_future(directory.get("shard-0", start)) for _ in range(3)]
    await asyncio.sleep(0)
    start.go.set()
    for outcome in await asyncio.gather(*getters, return_exceptions=True):
        assert isinstance(outcome, LookupError)
    start.fail = None
    assert await directory.get("shard-0", start) == "actor-2"


async def test_a_dropped_actor_is_started_again_but_a_newer_one_is_kept() -> None:
    directory, start = ActorDirectory(), Starts()
    start.go.set()
    first = await directory.get("shard-0", start)
    directory.drop("shard-0", first)
    second = await directory.get("shard-0", start)
    assert (first, second) == ("actor-1", "actor-2")
    directory.drop("shard-0", first)  # a stale handle's report: the new actor stays
    assert await directory.get("shard-0", start) == "actor-2"


async def test_a_cancelled_starter_hands_the_start_to_a_waiter() -> None:
    directory, start = ActorDirectory(), Starts()
    starter = asyncio.ensure_future(directory.get("shard-0", start))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(directory.get("shard-0", start))
    await asyncio.sleep(0)
    starter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starter
    start.go.set()
    assert await waiter == "actor-2"  # the waiter was not cancelled: it started it itself


async def test_a_cancelled_waiter_leaves_the_shared_start_running() -> None:
    directory, start = ActorDirectory(), Starts()
    starter = asyncio.ensure_future(directory.get("shard-0", start))
    await asyncio.sleep(0)
    waiter = asyncio.ensure_future(directory.get("shard-0", start))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    start.go.set()
    assert await starter == "actor-1"
    assert start.count == 1
