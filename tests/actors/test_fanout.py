"""The registry's fan-out never gives up (issue 12).

"A write returns only after every executor has seen it": ``Fanout.wait`` waits for a slow
executor however long it takes (logging at debug level every slow round), and the slow
executor stays attached. A failing but live executor is kept too (it resyncs on its next
sequence gap); only a dead one is dropped (``test_fanout_unit.py``). Plain objects stand in
for the actor handles, so no Ray cluster is needed.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any

import pytest

from toolray_actors.control import _fanout
from toolray_actors.control._fanout import Fanout


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
        self.apply_changes = _Method(future)


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
    with caplog.at_level(logging.DEBUG, logger="toolray"):
        seq = fanout.publish(("add", "op"))
        task = asyncio.ensure_future(fanout.wait(seq))
        for _ in range(2000):  # a bound: wait until several slow rounds were logged
            if sum(f"slow to apply change {seq}" in r.message for r in caplog.records) >= 5:
                break
            await asyncio.sleep(0.005)
        assert not task.done()
        slow.set_result(seq)
        await asyncio.wait_for(task, 5)
    assert set(fanout.executors) == {"slow", "fast"}
    assert fanout.executors["slow"].apply_changes.calls == [(seq, (("add", "op"),))]


async def test_a_failing_but_live_executor_stays_attached() -> None:
    fanout = Fanout("ns")
    fanout.executors = {
        "odd": _Executor(_settled(error=RuntimeError("resync on the next gap"))),
        "fine": _Executor(_settled(3)),
    }
    seq = fanout.publish(("remove", 3))
    await asyncio.wait_for(fanout.wait(seq), 5)
    assert set(fanout.executors) == {"odd", "fine"}
