"""Work done in an instance's turn for a call that stops waiting (``unless_aborted``)."""

from __future__ import annotations

import asyncio
import functools

import pytest

from toolray import AbortController
from toolray.environments._turns import Turnstile, unless_aborted
from toolray.errors import AbortError


async def _work(started: asyncio.Event, release: asyncio.Event, ended: list[str]) -> str:
    started.set()
    try:
        await release.wait()
    except asyncio.CancelledError:
        ended.append("cancelled")
        raise
    ended.append("done")
    return "opened"


def _free(turns: Turnstile) -> bool:
    turn = turns.try_enter()
    if turn is None:
        return False
    turns.leave(turn)
    return True


async def test_an_abort_returns_at_once_and_the_work_leaves_the_turn_when_it_ends() -> None:
    turns, ctrl, ended = Turnstile(), AbortController(), []
    started, release = asyncio.Event(), asyncio.Event()
    turn = await turns.enter(exclusive=True)
    leave = functools.partial(turns.leave, turn)
    call = asyncio.ensure_future(unless_aborted(_work(started, release, ended), ctrl.signal, leave))
    await started.wait()
    ctrl.abort("deadline")
    with pytest.raises(AbortError) as caught:
        await call
    assert caught.value.code == "ABORTED_BEFORE_DISPATCH"
    assert not _free(turns)  # the work still holds the instance
    release.set()
    later = await asyncio.wait_for(turns.enter(exclusive=True), 10)
    assert ended == ["done"]  # it finished alone, then left the turn
    turns.leave(later)


async def test_a_cancelled_caller_cancels_the_work_and_the_turn_is_left() -> None:
    turns, ended = Turnstile(), []
    started, release = asyncio.Event(), asyncio.Event()
    turn = await turns.enter(exclusive=True)
    leave = functools.partial(turns.leave, turn)
    call = asyncio.ensure_future(unless_aborted(_work(started, release, ended), None, leave))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    later = await asyncio.wait_for(turns.enter(exclusive=True), 10)
    assert ended == ["cancelled"]
    turns.leave(later)


async def test_success_keeps_the_turn_only_when_asked_and_failure_always_leaves_it() -> None:
    turns = Turnstile()

    async def ok() -> int:
        return 1

    async def boom() -> int:
        raise ValueError("create failed")

    for keep in (False, True):
        turn = await turns.enter(exclusive=True)
        leave = functools.partial(turns.leave, turn)
        assert await unless_aborted(ok(), AbortController().signal, leave, keep=keep) == 1
        assert _free(turns) is not keep
        if keep:
            turns.leave(turn)
    turn = await turns.enter(exclusive=True)
    with pytest.raises(ValueError, match="create failed"):
        await unless_aborted(boom(), None, functools.partial(turns.leave, turn), keep=True)
    assert _free(turns)
