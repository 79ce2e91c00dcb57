"""The registry's fan-out never gives up (DESIGN.md §2, API-v2 §12 issue 12).

"A write returns only after every executor has seen it": ``Fanout.publish`` waits for a
slow executor however long it takes (logging at debug level while it waits), keeps it
attached, and drops only an executor that is dead. Plain objects stand in for the actor
handles, so no Ray cluster is needed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

import pytest
import ray.exceptions as rex

from toolray_actors import _fanout
from toolray_actors._fanout import Fanout


class _Ref:
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future

    def future(self) -> concurrent.futures.Future[Any]:
        return self._future


class _Method:
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self._future = future
        self.calls: list[tuple[Any, ...]] = []

    def remote(self, *args: Any) -> _Ref:
        self.calls.append(args)
        return _Ref(self._future)


class _Executor:
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self.invalidate = _Method(future)


def _settled(value: Any = None, error: BaseException | None = None) -> Any:
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


async def test_a_write_waits_for_a_slow_executor_and_keeps_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_fanout, "_SLOW_S", 0.01)  # many "slow" rounds, no give-up
    slow: concurrent.futures.Future[Any] = concurrent.futures.Future()
    fanout = Fanout("ns")
    fanout.executors = {"slow": _Executor(slow), "fast": _Executor(_settled(1))}
    fanout.seq = 7
    with caplog.at_level(logging.DEBUG, logger="toolray"):
        task = asyncio.ensure_future(fanout.publish(("add", "op")))
        for _ in range(2000):  # a bound: wait until several slow rounds were logged
            if sum("slow to apply change 7" in r.message for r in caplog.records) >= 5:
                break
            await asyncio.sleep(0.005)
        assert not task.done()
        slow.set_result(7)
        await asyncio.wait_for(task, 5)
    assert set(fanout.executors) == {"slow", "fast"}
    assert fanout.executors["slow"].invalidate.calls == [(7, ("add", "op"))]


async def test_a_dead_executor_is_dropped_and_a_failing_one_kept() -> None:
    fanout = Fanout("ns")
    fanout.executors = {
        "dead": _Executor(_settled(error=rex.ActorDiedError())),
        "odd": _Executor(_settled(error=RuntimeError("resync on the next gap"))),
        "fine": _Executor(_settled(3)),
    }
    await asyncio.wait_for(fanout.publish(("remove", 3)), 5)
    assert set(fanout.executors) == {"odd", "fine"}
