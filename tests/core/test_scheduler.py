"""The scheduler's failure paths (B-ERR-2, C-CODE-12): a lane that fails, a driver cancelled.

A failure on a lane (here: a commit hook that raises) stops it; started dispatch stages are
awaited, never left behind. A closed lane raises once they are done; an open lane tells its
hooks which calls will not commit (so no caller waits forever) and ``drain()`` raises the
failure. An open lane whose driving caller is cancelled cancels the waiting outcomes and
refuses new calls; draining it returns once the running bodies are done.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolray import AbortController, ToolExecutionInput, ToolOutput, ToolRegistry, define_tool
from toolray import text_block as text
from toolray.lowlevel import Call, run_body_inline
from toolray.scheduler._engine import Hooks, Scheduler
from toolray.testing import Gate


class Boom(Exception):
    pass


class Recorder(Hooks):
    def __init__(self, fail_at: int | None = None) -> None:
        self.events: list[str] = []
        self.failure: tuple[str, int, int] | None = None
        self.fail_at = fail_at

    def started(self, index: int, mode: Any) -> None:
        self.events.append(f"start:{index}")

    def settled(self, index: int, call: Call) -> None:
        self.events.append(f"settle:{index}")

    async def committed(self, index: int, call: Call, result: Any) -> None:
        if index == self.fail_at:
            raise Boom(f"commit {index} broke")
        self.events.append(f"commit:{index}")

    def failed(self, error: BaseException, start: int, stop: int) -> None:
        self.failure = (type(error).__name__, start, stop)


def _registry(
    gates: dict[str, Gate], ended: list[str], entered: dict[str, Gate] | None = None
) -> ToolRegistry:
    async def body(args: Any, ctx: Any) -> str:
        key = args["key"]
        if entered is not None:
            entered.setdefault(key, Gate()).open()
        if key in gates:
            await gates[key].wait()
        ended.append(key)
        return key

    reg = ToolRegistry()
    reg.register(
        define_tool(
            name="t",
            description=None,
            parameters={"key": {"type": "string", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
            execute=body,
            is_concurrency_safe=lambda args: True,
        )
    )
    return reg


def _inputs(signal: Any, *keys: str) -> list[ToolExecutionInput]:
    return [ToolExecutionInput(f"c{k}", "t", {"key": k}, signal) for k in keys]


async def test_b_err_2_a_closed_lane_awaits_its_started_bodies_then_raises() -> None:
    gates, ended, entered = {"1": Gate()}, [], {"1": Gate()}
    reg, ctl, hooks = _registry(gates, ended, entered), AbortController(), Recorder(fail_at=0)
    calls = _inputs(ctl.signal, "0", "1")
    lane = Scheduler(reg, ctl.signal, 4, run_body_inline, hooks, calls=calls)
    run = asyncio.ensure_future(lane.run())
    await entered["1"].wait()  # both started; 0 settles and its commit raises
    assert not run.done()  # the running body of 1 is awaited, not abandoned
    gates["1"].open()
    with pytest.raises(Boom, match="commit 0 broke"):
        await run
    assert ended == ["0", "1"]
    assert "commit:1" not in hooks.events


async def test_c_code_12_an_open_lane_failure_reaches_every_waiting_call_and_drain() -> None:
    gates, ended = {"1": Gate()}, []
    reg, ctl, hooks = _registry(gates, ended), AbortController(), Recorder(fail_at=0)
    lane = Scheduler(reg, ctl.signal, 4, run_body_inline, hooks)
    for inp in _inputs(ctl.signal, "0", "1", "2"):
        lane.submit(inp)
    with pytest.raises(Boom):
        await lane.serve(lambda: False)
    assert hooks.failure == ("Boom", 0, 3)  # none of the three will commit
    with pytest.raises(Boom):
        lane.submit(_inputs(ctl.signal, "3")[0])  # the lane is dead
    gates["1"].open()
    ctl.abort()
    with pytest.raises(Boom):
        await asyncio.wait_for(lane.drain(), 10)
    assert "1" in ended  # the started body was awaited before drain returned


async def test_c_code_12_a_cancelled_driver_cancels_the_waiting_calls_and_drains_quietly() -> None:
    gates, ended, entered = {"0": Gate()}, [], {"0": Gate()}
    reg, ctl, hooks = _registry(gates, ended, entered), AbortController(), Recorder()
    lane = Scheduler(reg, ctl.signal, 4, run_body_inline, hooks)
    lane.submit(_inputs(ctl.signal, "0")[0])
    driver = asyncio.ensure_future(lane.serve(lambda: False))
    await entered["0"].wait()
    driver.cancel()
    with pytest.raises(asyncio.CancelledError):
        await driver
    assert hooks.failure == ("CancelledError", 0, 1)
    with pytest.raises(asyncio.CancelledError):
        lane.submit(_inputs(ctl.signal, "1")[0])
    gates["0"].open()
    ctl.abort()
    await asyncio.wait_for(lane.drain(), 10)  # no failure to raise, no driver spinning
    assert ended == ["0"]
