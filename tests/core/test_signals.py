"""Signals: reasons, listeners, waiting from threads and loops, any, timeout."""

from __future__ import annotations

import asyncio
import threading

import pytest

from toolray import AbortController, AbortError, AbortSignal, TimeoutReason
from toolray.testing import FakeClock, Gate


def test_first_reason_wins_and_abort_is_idempotent() -> None:
    ctrl = AbortController()
    assert not ctrl.signal.aborted
    assert ctrl.signal.reason is None
    ctrl.abort("first")
    ctrl.abort("second")
    assert ctrl.signal.aborted
    assert ctrl.signal.reason == "first"


def test_default_reason_is_an_abort_error() -> None:
    ctrl = AbortController()
    ctrl.abort()
    assert isinstance(ctrl.signal.reason, AbortError)
    with pytest.raises(AbortError):
        ctrl.signal.throw_if_aborted()


def test_throw_if_aborted_raises_exception_reasons_and_abort_error_otherwise() -> None:
    AbortController().signal.throw_if_aborted()  # not aborted: nothing
    boom = RuntimeError("boom")
    with pytest.raises(RuntimeError, match="boom"):
        AbortSignal.aborted_with(boom).throw_if_aborted()
    with pytest.raises(AbortError):
        AbortSignal.aborted_with("user").throw_if_aborted()


def test_listener_runs_once_and_at_once_when_already_aborted() -> None:
    ctrl = AbortController()
    calls: list[str] = []
    ctrl.signal.add_listener(lambda: calls.append("a"))
    removed = ctrl.signal.add_listener(lambda: calls.append("removed"))
    removed()
    ctrl.abort()
    ctrl.abort()
    ctrl.signal.add_listener(lambda: calls.append("late"))
    assert calls == ["a", "late"]


def test_a_raising_listener_does_not_stop_the_others() -> None:
    ctrl = AbortController()
    seen: list[int] = []

    def bad() -> None:
        raise ValueError("listener broke")

    ctrl.signal.add_listener(bad)
    ctrl.signal.add_listener(lambda: seen.append(1))
    ctrl.abort()
    assert seen == [1]


async def test_wait_wakes_on_abort_from_another_thread() -> None:
    ctrl = AbortController()
    started = threading.Event()

    def fire() -> None:
        started.wait()
        ctrl.abort("from thread")

    thread = threading.Thread(target=fire)
    thread.start()
    waiter = asyncio.ensure_future(ctrl.signal.wait())
    await asyncio.sleep(0)
    started.set()
    await asyncio.wait_for(waiter, timeout=10)
    thread.join()
    assert ctrl.signal.reason == "from thread"


def test_wait_sync_from_a_thread_sees_an_abort() -> None:
    ctrl = AbortController()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(ctrl.signal.wait_sync(10)))
    thread.start()
    ctrl.abort()
    thread.join()
    assert result == [True]
    assert AbortController().signal.wait_sync(0) is False


def test_any_takes_the_first_reason_and_already_aborted_sources() -> None:
    a, b = AbortController(), AbortController()
    fused = AbortSignal.any([a.signal, b.signal])
    b.abort("b first")
    a.abort("a later")
    assert fused.reason == "b first"
    assert (
        AbortSignal.any([AbortSignal.aborted_with("x"), AbortSignal.aborted_with("y")]).reason
        == "x"
    )


async def test_timeout_on_a_fake_clock_fires_with_a_timeout_reason() -> None:
    clock = FakeClock()
    signal = AbortSignal.timeout(250, clock=clock)
    await asyncio.sleep(0)
    clock.advance(0.2)
    await asyncio.sleep(0)
    assert not signal.aborted
    clock.advance(0.1)
    await signal.wait()
    assert signal.reason == TimeoutReason(ms=250)
    assert signal.reason.code == "TOOL_TIMEOUT"
    assert str(signal.reason) == "timed out after 250ms"


async def test_fake_clock_autojump_takes_no_real_time() -> None:
    clock = FakeClock(autojump=True)
    loop = asyncio.get_running_loop()
    before = loop.time()
    signal = AbortSignal.timeout(30_000, clock=clock)
    await signal.wait()
    assert clock.now() == pytest.approx(30.0)
    assert loop.time() - before < 5


def test_timeout_without_a_loop_uses_a_thread_timer() -> None:
    signal = AbortSignal.timeout(1)
    assert signal.wait_sync(10)
    assert isinstance(signal.reason, TimeoutReason)


async def test_gate_opens_for_async_and_thread_waiters() -> None:
    gate = Gate()
    seen: list[bool] = []
    thread = threading.Thread(target=lambda: seen.append(gate.wait_sync(10)))
    thread.start()
    waiter = asyncio.ensure_future(gate.wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    gate.open()
    await waiter
    thread.join()
    assert seen == [True]
    assert gate.is_open


async def test_recording_tool_records_order_and_concurrency() -> None:
    from toolray import AbortController, ToolBatchInput, ToolCall, ToolRegistry
    from toolray.testing import RecordingTool

    rec = RecordingTool(name="rec")
    registry = ToolRegistry()
    registry.register(rec.definition())
    calls = [ToolCall(f"c{i}", "rec", f'{{"key": "k{i}"}}') for i in range(3)]
    out = await registry.execute_batch(ToolBatchInput(calls, AbortController().signal))
    assert [r.result.value for r in out.results] == ["k0", "k1", "k2"]
    assert rec.starts == ["k0", "k1", "k2"]
    assert sorted(rec.ends) == ["k0", "k1", "k2"]
    assert rec.max_concurrency == 3  # all three overlapped (each yields once before ending)
