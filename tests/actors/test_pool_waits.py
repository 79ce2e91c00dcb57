"""Pool membership without Ray: calls wait for started workers, abortably.

A pool whose workers cannot be scheduled yet (resources absent) has no members; its calls
wait in the executor (``PoolClient.pick``) — an abort (a deadline) ends the wait at once
with ``AbortError`` and nothing was sent anywhere — and ``PoolManager.ready()`` does not
block on it. A worker becomes a member when it first answers. Fake handles stand in for
the worker actors; the real thing runs in ``test_placement.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray import AbortController, AbortError
from toolray_actors._placement import WorkerSettings
from toolray_actors.execution import _pool
from toolray_actors.execution._pool import PoolClient, PoolManager


class _Call:
    def __init__(self, fn: Any) -> None:
        self._fn = fn

    def remote(self, *args: Any) -> Any:
        return asyncio.ensure_future(self._fn(*args))


async def _no_processes() -> int:
    return 0


class _Worker:
    """A worker whose start the test controls (``health`` answers once started)."""

    def __init__(self) -> None:
        self.started = asyncio.get_running_loop().create_future()

        async def health() -> int:
            return await asyncio.shield(self.started)  # type: ignore[no-any-return]

        async def until_death() -> None:
            await asyncio.get_running_loop().create_future()  # it never dies here

        self.health = _Call(health)
        self.warm_up = _Call(_no_processes)
        self.until_death = _Call(until_death)


class _Remote:
    """The manager as an executor sees it: ``manager.method.remote(...)``."""

    def __init__(self, manager: PoolManager) -> None:
        self._manager = manager

    def __getattr__(self, name: str) -> _Call:
        return _Call(getattr(self._manager, name))


@pytest.fixture
def workers(monkeypatch: pytest.MonkeyPatch) -> list[_Worker]:
    made: list[_Worker] = []

    def create(options: dict[str, Any], settings: Any) -> _Worker:
        made.append(_Worker())
        return made[-1]

    monkeypatch.setattr(_pool, "create_worker", create)
    monkeypatch.setattr(_pool, "kill", lambda handle: None)
    monkeypatch.setattr(_pool, "resources_offered", lambda options: False)
    return made


async def test_calls_wait_for_members_and_an_abort_ends_the_wait(workers: list[_Worker]) -> None:
    manager = PoolManager(1, 0, {"resources": {"absent": 1}}, WorkerSettings())
    assert await asyncio.wait_for(manager.ready(), 5) == 0  # no node offers it: no blocking
    client = PoolClient(_Remote(manager))
    ctrl = AbortController()
    waiting = asyncio.ensure_future(client.pick(ctrl.signal))
    await asyncio.sleep(0)  # let the pick reach its wait
    assert not waiting.done()
    ctrl.abort("deadline")
    with pytest.raises(AbortError, match="tool call aborted"):
        await asyncio.wait_for(waiting, 5)
    assert (await manager.members())[1] == []


async def test_a_worker_becomes_a_member_when_it_starts(workers: list[_Worker]) -> None:
    manager = PoolManager(1, 0, {}, WorkerSettings())
    client = PoolClient(_Remote(manager))
    picked = asyncio.ensure_future(client.pick(AbortController().signal))
    await asyncio.sleep(0)
    assert not picked.done()
    workers[0].started.set_result(123)
    slot = await asyncio.wait_for(picked, 5)
    assert slot.handle is workers[0]
    assert [wid for wid, _ in (await manager.members())[1]] == [slot.wid]
