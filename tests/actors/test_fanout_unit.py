"""Registry fan-out without Ray actors: group commit, sequence order, dead executors.

Fake executor handles stand in for actors: ``apply_changes.remote(first, deltas)`` records
the message and returns a ref whose future the test resolves.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import ray.exceptions as rex

from toolray_actors.control._fanout import Fanout


class _Ref:
    def __init__(self, fut: concurrent.futures.Future[Any]) -> None:
        self._fut = fut

    def future(self) -> concurrent.futures.Future[Any]:
        return self._fut


class FakeExecutor:
    """Records each ``apply_changes`` message; the test answers them in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[int, tuple[Any, ...]]] = []
        self.pending: list[concurrent.futures.Future[Any]] = []
        outer = self

        class _Method:
            def remote(self, first: int, deltas: tuple[Any, ...]) -> _Ref:
                outer.messages.append((first, deltas))
                fut: concurrent.futures.Future[Any] = concurrent.futures.Future()
                outer.pending.append(fut)
                return _Ref(fut)

        self.apply_changes = _Method()

    def answer(self, error: BaseException | None = None) -> None:
        fut = self.pending.pop(0)
        if error is None:
            fut.set_result(0)
        else:
            fut.set_exception(error)


async def _until(predicate: Any) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


async def test_concurrent_writes_reach_each_executor_in_one_message_in_sequence_order() -> None:
    fanout = Fanout("ns")
    a, b = FakeExecutor(), FakeExecutor()
    fanout.executors.update(a=a, b=b)
    first = fanout.publish(("add", 1))
    waiting = asyncio.ensure_future(fanout.wait(first))
    await _until(lambda: len(a.messages) == 1)
    later = [fanout.publish(("add", n)) for n in (2, 3, 4)]  # while change 1 is out
    waits = [asyncio.ensure_future(fanout.wait(seq)) for seq in later]
    a.answer()
    await asyncio.sleep(0)
    assert not waiting.done()  # b has not applied change 1 yet
    b.answer()
    await asyncio.wait_for(waiting, 1)
    await _until(lambda: len(a.messages) == 2 and len(b.messages) == 2)
    expected = [(1, (("add", 1),)), (2, (("add", 2), ("add", 3), ("add", 4)))]
    assert a.messages == b.messages == expected
    assert not any(w.done() for w in waits)
    a.answer()
    b.answer()
    await asyncio.wait_for(asyncio.gather(*waits), 1)
    assert fanout.messages == 4  # two groups × two executors, for four writes


async def test_a_dead_executor_is_dropped_and_does_not_hold_the_write() -> None:
    fanout = Fanout("ns")
    live, dead = FakeExecutor(), FakeExecutor()
    fanout.executors.update(live=live, dead=dead)
    seq = fanout.publish(("remove", 7))
    waiting = asyncio.ensure_future(fanout.wait(seq))
    await _until(lambda: dead.pending and live.pending)
    dead.answer(rex.ActorDiedError())
    live.answer()
    await asyncio.wait_for(waiting, 1)
    assert list(fanout.executors) == ["live"]


async def test_waiting_for_a_change_already_applied_returns_at_once() -> None:
    fanout = Fanout("ns")
    seq = fanout.publish(("add", 1))  # no executor attached: nothing to wait for
    await asyncio.wait_for(fanout.wait(seq), 1)
    await asyncio.wait_for(fanout.wait(seq), 1)
    await asyncio.wait_for(fanout.wait(0), 1)
