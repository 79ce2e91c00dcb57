"""Backpressure in the driver: a bounded number of batches in flight per executor actor.

No Ray here: :class:`Admission` alone, on real event loops (and one in another thread).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest

from toolray import AbortController
from toolray_actors.driver._admission import Admission

WAIT_S = 10.0


async def _holder(adm: Admission, name: str, order: list[int], i: int, gate: asyncio.Event) -> None:
    async with adm.slot(name):
        order.append(i)
        await gate.wait()


async def _until(ready: Callable[[], bool]) -> None:
    """Let the loop run until ``ready()`` holds (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while not ready():
        assert time.monotonic() < deadline, "never became ready"
        await asyncio.sleep(0)


async def test_at_most_limit_run_and_the_rest_go_in_the_order_submitted() -> None:
    adm, order = Admission(2), []
    gates = [asyncio.Event() for _ in range(6)]
    tasks = [asyncio.ensure_future(_holder(adm, "a", order, i, g)) for i, g in enumerate(gates)]
    await _until(lambda: len(order) == 2)
    assert adm.snapshot() == (2, 4, 4)
    for i in (1, 0, 3, 2, 5, 4):  # ends in any order: the waiting ones start in theirs
        gates[i].set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4, 5]
    assert adm.snapshot() == (0, 0, 4)


async def test_slots_are_handed_over_a_quarter_of_the_bound_at_a_time() -> None:
    adm, order = Admission(8), []
    gates = [asyncio.Event() for _ in range(12)]
    tasks = [asyncio.ensure_future(_holder(adm, "a", order, i, g)) for i, g in enumerate(gates)]
    await _until(lambda: len(order) == 8)
    gates[0].set()
    await tasks[0]
    assert adm.snapshot()[:2] == (7, 4)  # one free slot: nobody woken yet
    gates[1].set()
    await tasks[1]
    await _until(lambda: len(order) == 10)  # two free (a quarter of 8): two go together
    assert order[8:] == [8, 9]
    assert adm.snapshot()[:2] == (8, 2)
    for gate in gates:
        gate.set()
    await asyncio.gather(*tasks)
    assert order == list(range(12))
    assert adm.snapshot()[:2] == (0, 0)


async def test_each_actor_has_its_own_bound() -> None:
    adm, order = Admission(1), []
    gate = asyncio.Event()
    tasks = [asyncio.ensure_future(_holder(adm, n, order, i, gate)) for i, n in enumerate("abab")]
    await _until(lambda: len(order) == 2)
    assert sorted(order) == [0, 1]
    assert adm.snapshot()[:2] == (2, 2)
    gate.set()
    await asyncio.gather(*tasks)
    assert sorted(order) == [0, 1, 2, 3]


async def test_a_cancelled_waiter_leaves_the_queue_and_loses_no_slot() -> None:
    adm, order = Admission(1), []
    first, gate = asyncio.Event(), asyncio.Event()
    holding = asyncio.ensure_future(_holder(adm, "a", order, 0, first))
    waiting = [asyncio.ensure_future(_holder(adm, "a", order, i, gate)) for i in (1, 2)]
    await _until(lambda: adm.snapshot()[1] == 2)
    waiting[0].cancel()
    await _until(lambda: adm.snapshot()[1] == 1)
    first.set()
    gate.set()
    await asyncio.gather(holding, waiting[1])
    assert order == [0, 2]
    assert waiting[0].cancelled()
    assert adm.snapshot()[:2] == (0, 0)


async def test_a_waiter_cancelled_as_its_slot_arrives_passes_it_on() -> None:
    adm, order = Admission(1), []
    first, gate = asyncio.Event(), asyncio.Event()
    holding = asyncio.ensure_future(_holder(adm, "a", order, 0, first))
    doomed = asyncio.ensure_future(_holder(adm, "a", order, 1, gate))
    last = asyncio.ensure_future(_holder(adm, "a", order, 2, gate))
    await _until(lambda: adm.snapshot()[1] == 2)
    first.set()
    await holding  # its slot was handed to `doomed` (woken on the next turn of the loop)
    doomed.cancel()  # cancelled before it runs: the slot goes on to `last`
    gate.set()
    await last
    assert order == [0, 2]
    assert adm.snapshot()[:2] == (0, 0)


async def test_an_aborted_waiter_goes_at_once_without_a_slot() -> None:
    adm, order = Admission(1), []
    gate = asyncio.Event()
    holding = asyncio.ensure_future(_holder(adm, "a", order, 0, gate))
    await _until(lambda: order == [0])
    ctrl = AbortController()

    async def aborted_one() -> None:
        async with adm.slot("a", ctrl.signal):
            order.append(1)

    late = asyncio.ensure_future(aborted_one())
    await _until(lambda: adm.snapshot()[1] == 1)
    ctrl.abort("deadline")
    await late  # back while the slot is still held
    assert order == [0, 1]
    assert adm.snapshot()[:2] == (1, 0)
    gate.set()
    await holding
    assert adm.snapshot()[:2] == (0, 0)  # the bypass released nothing it did not hold


async def test_an_already_aborted_batch_never_waits() -> None:
    adm, gate = Admission(1), asyncio.Event()
    holding = asyncio.ensure_future(_holder(adm, "a", [], 0, gate))
    await _until(lambda: adm.snapshot()[0] == 1)
    ctrl = AbortController()
    ctrl.abort("gone")
    async with asyncio.timeout(WAIT_S), adm.slot("a", ctrl.signal):
        assert adm.snapshot()[:2] == (1, 0)
    gate.set()
    await holding


async def test_a_waiter_on_another_threads_loop_is_woken_there() -> None:
    adm, gate = Admission(1), asyncio.Event()
    holding = asyncio.ensure_future(_holder(adm, "a", [], 0, gate))
    await _until(lambda: adm.snapshot()[0] == 1)
    ran: list[str] = []

    async def other() -> None:
        async with adm.slot("a"):
            ran.append(threading.current_thread().name)

    thread = threading.Thread(target=asyncio.run, args=(other(),), name="other-loop")
    thread.start()
    await _until(lambda: adm.snapshot()[1] == 1)
    gate.set()
    await holding
    await asyncio.to_thread(thread.join, WAIT_S)
    assert ran == ["other-loop"]
    assert adm.snapshot()[:2] == (0, 0)


@pytest.mark.parametrize("limit", [0, -1])
async def test_no_bound_admits_everything(limit: int) -> None:
    adm, order, gate = Admission(limit), [], asyncio.Event()
    tasks = [asyncio.ensure_future(_holder(adm, "a", order, i, gate)) for i in range(50)]
    await _until(lambda: len(order) == 50)
    assert adm.snapshot() == (50, 0, 0)
    gate.set()
    await asyncio.gather(*tasks)
