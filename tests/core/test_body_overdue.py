"""A body's budget (``timeout_s``, from its start) and a starved loop: a body that ended in
time is never reported overdue, whichever of its end and its timer the loop runs first.

The starvation is real: the loop thread is held (a blocking callback) while the body
returns and past its deadline, as a process waiting for a CPU among hundreds would be; the
gates are events, never sleeps as synchronisation.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from toolray.isolation import BodyHost, context_from_ident

GUARD_S = 30.0
BUDGET_S = 0.05


def _host() -> BodyHost:
    return BodyHost(lambda signal, ident: context_from_ident(signal, ident, None), threads=2)


def _ident() -> dict[str, Any]:
    return {"name": "t", "call_id": "c", "timeout_s": BUDGET_S}


HOLD_S = 0.5
"""How long the loop is held past a body's start: ten budgets (a starved process)."""


def _hold(started: float, held: threading.Event) -> None:
    """Hold the loop thread until well past the deadline: nothing on the loop runs."""
    held.set()
    time.sleep(max(0.0, started + HOLD_S - time.monotonic()))


async def _run(execute: Any) -> tuple[Any, list[str]]:
    told: list[str] = []
    outcome = await asyncio.wait_for(
        _host().run_resolved("tok", execute, {}, _ident(), lambda: told.append("overdue")),
        GUARD_S,
    )
    return outcome, told


async def test_a_body_thread_that_returned_in_time_is_not_overdue_on_a_starved_loop() -> None:
    loop = asyncio.get_running_loop()
    held = threading.Event()

    def body(args: Any, ctx: Any) -> str:
        loop.call_soon_threadsafe(_hold, time.monotonic(), held)
        assert held.wait(GUARD_S)  # the loop is held: this end is queued behind it
        return "done"

    outcome, told = await _run(body)
    assert (outcome.status, outcome.value) == ("ok", "done")
    assert told == []


async def test_an_async_body_that_woke_in_time_is_not_overdue_on_a_starved_loop() -> None:
    held = threading.Event()

    async def body(args: Any, ctx: Any) -> str:
        asyncio.get_running_loop().call_soon(_hold, time.monotonic(), held)
        await asyncio.sleep(BUDGET_S / 5)  # due long before the budget's timer
        return "woke"

    outcome, told = await _run(body)
    assert held.is_set()
    assert (outcome.status, outcome.value) == ("ok", "woke")
    assert told == []


async def test_a_body_past_its_budget_is_still_told_overdue() -> None:
    release = threading.Event()
    told: list[str] = []

    def body(args: Any, ctx: Any) -> str:
        assert release.wait(GUARD_S)
        return "late"

    host = _host()
    overdue = asyncio.Event()

    def on_overdue() -> None:
        told.append("overdue")
        overdue.set()

    running = asyncio.ensure_future(host.run_resolved("tok", body, {}, _ident(), on_overdue))
    await asyncio.wait_for(overdue.wait(), GUARD_S)
    release.set()
    outcome = await asyncio.wait_for(running, GUARD_S)
    assert told == ["overdue"]
    assert outcome.value == "late"  # what the owner does with the word is its own


async def test_a_sync_body_that_returns_an_awaitable_counts_until_it_is_awaited() -> None:
    release = asyncio.Event()
    told: list[str] = []
    overdue = asyncio.Event()

    async def rest() -> str:
        await release.wait()
        return "awaited"

    def body(args: Any, ctx: Any) -> Any:
        return rest()  # the thread ends at once; the body goes on in the coroutine

    def on_overdue() -> None:
        told.append("overdue")
        overdue.set()

    running = asyncio.ensure_future(_host().run_resolved("tok", body, {}, _ident(), on_overdue))
    await asyncio.wait_for(overdue.wait(), GUARD_S)
    release.set()
    outcome = await asyncio.wait_for(running, GUARD_S)
    assert (told, outcome.value) == (["overdue"], "awaited")
