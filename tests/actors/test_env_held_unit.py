"""An executor's record of the instances it holds (``_Held``): written in order, and a new
instance's record awaited until it is written (an executor killed right after a call that
opened an instance must come back knowing of it)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from toolray_actors.execution._env_service import _Held

GUARD_S = 30.0


class SlowStore:
    """A store whose first write of a record waits for ``gate``; a failing one raises."""

    def __init__(self, *, failing: bool = False) -> None:
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.failing = failing
        self.log: list[tuple[object, ...]] = []

    def put_instance(self, executor: str, scope: str | None, name: str, where: bytes) -> None:
        self.entered.set()
        self.gate.wait(GUARD_S)
        if self.failing:
            raise ConnectionError("the GCS is restarting")
        self.log.append(("put", executor, scope, name, where))

    def del_instance(self, executor: str, scope: str | None, name: str) -> None:
        self.log.append(("del", executor, scope, name))


async def test_a_record_is_done_once_written_and_later_words_follow_it() -> None:
    store = SlowStore()
    held: Any = _Held(store, "ex-1")  # type: ignore[arg-type]
    opening = held.note("s", "tally", b"w1 i1")
    assert await asyncio.to_thread(store.entered.wait, GUARD_S)
    closing = held.note("s", "tally", None)  # while the open's record is being written
    reopening = held.note("s", "tally", b"w2 i2")
    other = held.note("t", "tally", None)
    assert not opening.done()  # the open's record is not written yet: its call must wait
    store.gate.set()
    await asyncio.wait_for(asyncio.gather(opening, closing, reopening, other), GUARD_S)
    # in order per instance; a word made moot by a later one in the same batch is skipped
    assert [e for e in store.log if e[2] == "s"] == [
        ("put", "ex-1", "s", "tally", b"w1 i1"),
        ("put", "ex-1", "s", "tally", b"w2 i2"),
    ]
    assert ("del", "ex-1", "t", "tally") in store.log


async def test_a_record_that_cannot_be_written_does_not_hold_its_instance_back() -> None:
    store = SlowStore(failing=True)
    store.gate.set()
    held: Any = _Held(store, "ex-2")  # type: ignore[arg-type]
    await asyncio.wait_for(held.note("s", "tally", b"w1 i1"), GUARD_S)
    assert store.log == []
