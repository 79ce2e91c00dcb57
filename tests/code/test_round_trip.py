"""The binding round trip's fast paths: large frames in chunks, a lone call waited for on the
socket (polled a moment first; never when something else of the program could run), the
limits still enforced."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.code._helpers import child_pids, run, warm_pids
from toolray import AbortController
from toolray.code import PythonRuntime
from toolray.errors import AbortError, ToolTimeoutError


async def test_frames_larger_than_a_read_cross_whole_both_ways(runtime: PythonRuntime) -> None:
    # The program, the arguments and the reply each span many 64 KiB reads.
    async def grow(args: Any) -> Any:
        return {"text": args["text"] * 3, "items": list(range(50_000))}

    filler = "x" * 100_000
    program = (
        f"pad = {filler!r}\n"
        "out = await grow(text='ab' * 400_000)\n"
        "[len(pad), len(out['text']), out['text'][:4], sum(out['items'])]"
    )
    got = await run(runtime, program, {"grow": grow})
    assert got.result == [100_000, 2_400_000, "abab", sum(range(50_000))]


async def test_sequential_calls_return_their_own_values_in_order(runtime: PythonRuntime) -> None:
    async def echo(args: Any) -> Any:
        return args["i"]

    program = "[await echo(i=i) for i in range(300)]"
    assert (await run(runtime, program, {"echo": echo})).result == list(range(300))


async def test_a_lone_call_gets_its_reply_whether_it_comes_soon_or_late(
    runtime: PythonRuntime,
) -> None:
    # The child polls a moment for a lone call's reply, then blocks (and after a reply that
    # came late, blocks at once for a while): fast and slow replies, in every mix, arrive
    # whole and in order.
    async def pick(args: Any) -> Any:
        if args["i"] % 20 < 3:  # a slow tool, three calls in a row
            await asyncio.sleep(0.005)
        return args["i"]

    program = "[await pick(i=i) for i in range(60)]"
    assert (await run(runtime, program, {"pick": pick})).result == list(range(60))


async def test_a_call_made_while_another_task_is_ready_does_not_hold_it_back(
    runtime: PythonRuntime,
) -> None:
    # `first` is answered only once `second` arrives, and `second` is called by a task
    # that is ready (not yet started) when `first` goes out: the child must keep running
    # its loop while `first` is outstanding.
    second_called = asyncio.Event()

    async def first(args: Any) -> Any:
        await second_called.wait()
        return "first"

    async def second(args: Any) -> Any:
        second_called.set()
        return "second"

    program = (
        "import asyncio\n"
        "task = asyncio.create_task(tools.second())\n"
        "[await tools.first(), await task]"
    )
    got = await run(runtime, program, {"first": first, "second": second})
    assert got.result == ["first", "second"]


async def test_timers_and_background_tasks_run_between_sequential_calls(
    runtime: PythonRuntime,
) -> None:
    async def echo(args: Any) -> Any:
        return args["i"]

    program = (
        "import asyncio\n"
        "ticks = []\n"
        "async def ticker():\n"
        "    for i in range(3):\n"
        "        await asyncio.sleep(0.001)\n"
        "        ticks.append(i)\n"
        "task = asyncio.create_task(ticker())\n"
        "total = 0\n"
        "while not task.done():\n"
        "    total += await echo(i=1)\n"
        "[ticks, total > 0]"
    )
    assert (await run(runtime, program, {"echo": echo})).result == [[0, 1, 2], True]


def _hold() -> tuple[asyncio.Event, dict[str, Any]]:
    entered = asyncio.Event()

    async def hold(args: Any) -> Any:
        entered.set()
        await asyncio.Event().wait()  # never answers

    return entered, {"hold": hold}


async def test_the_deadline_kills_a_program_waiting_on_a_lone_call() -> None:
    short = PythonRuntime(timeout_s=0.3)
    try:
        used = await warm_pids(short)
        _, bindings = _hold()
        with pytest.raises(ToolTimeoutError):
            await run(short, "await tools.hold()", bindings)
        assert used.isdisjoint(child_pids())
    finally:
        short.close()


async def test_an_abort_reaches_a_program_waiting_on_a_lone_call(runtime: PythonRuntime) -> None:
    used = await warm_pids(runtime)
    entered, bindings = _hold()
    ctrl = AbortController()
    task = asyncio.ensure_future(run(runtime, "x = 1\nawait tools.hold()", bindings, ctrl.signal))
    await entered.wait()
    ctrl.abort("stop")
    with pytest.raises(AbortError):
        await task
    assert used.isdisjoint(child_pids())
    assert (await run(runtime, "1")).result == 1


async def test_the_read_budget_still_counts_every_frame() -> None:
    # Each call's frame counts toward max_run_bytes, whichever way the child waits.
    small = PythonRuntime(max_run_bytes=4096)
    try:

        async def echo(args: Any) -> Any:
            return 1

        with pytest.raises(Exception) as caught:
            await run(small, "for i in range(500):\n    await echo(i=i)", {"echo": echo})
        assert "more than 4096 bytes" in str(caught.value)
    finally:
        small.close()
