"""The host against its child: floods, outstanding calls, echoes, scratch space, endless loops."""

from __future__ import annotations

import asyncio
import os
import time

import psutil
import pytest

from tests.code.redteam._kit import attack, still_serves
from toolray.code import PythonRuntime
from toolray.errors import CodeRunFailedError, ToolTimeoutError

MIB = 1024 * 1024
RAW = (
    "import json\n"
    "fd = print.__self__.wire.out_fd\n"
    "os.set_blocking(fd, True)\n"
    "def frame(obj):\n"
    "    data = json.dumps(obj).encode()\n"
    "    return len(data).to_bytes(4, 'big') + data\n"
)


async def test_a_reply_flood_leaves_the_hosts_memory_bounded() -> None:
    # The program sends call after call and never reads a reply: unbounded, the host's
    # write buffer would hold every reply (64 KiB each, 6 GiB for these calls).
    runtime = PythonRuntime(timeout_s=4)
    host = psutil.Process()
    peak = {"rss": 0, "calls": 0}

    async def big(args):
        peak["calls"] += 1
        peak["rss"] = max(peak["rss"], host.memory_info().rss)
        return "x" * 65536

    try:
        before = host.memory_info().rss
        program = (
            RAW
            + "for i in range(1, 100_000):\n"
            + "    os.write(fd, frame({'op': 'call', 'id': i, 'name': 'big', 'args': {}}))"
        )
        outcome = await attack(runtime, program, {"big": big})
        assert isinstance(outcome, ToolTimeoutError)  # the child blocked; the deadline ended it
        assert 0 < peak["calls"] < 1000  # the host stopped reading once replies piled up
        assert peak["rss"] - before < 64 * MIB  # less than max_run_bytes
        await still_serves(runtime)
    finally:
        runtime.close()


async def test_more_bytes_than_max_run_bytes_fail_the_run_as_protocol() -> None:
    runtime = PythonRuntime(max_run_bytes=4 * MIB)
    host = psutil.Process()
    try:
        before = host.memory_info().rss
        program = (
            RAW
            + "line = frame({'op': 'log', 'text': 'y' * (1 << 20)})\n"
            + "while True:\n    os.write(fd, line)"
        )
        outcome = await attack(runtime, program)
        assert isinstance(outcome, CodeRunFailedError)
        assert outcome.message.startswith(
            "code run failed (protocol): the program sent more than 4194304 bytes"
        )
        assert host.memory_info().rss - before < 64 * MIB
        await still_serves(runtime)
    finally:
        runtime.close()


async def test_at_most_max_outstanding_calls_are_in_flight() -> None:
    # 200 calls arrive in one write, so the host decodes them together: it must still start
    # no more than 8 at a time (unbounded, all 200 would start before the first one ends).
    runtime = PythonRuntime(max_outstanding_calls=8)
    state = {"now": 0, "most": 0, "calls": 0}
    gate = asyncio.Event()

    async def slow(args):
        state["now"] += 1
        state["calls"] += 1
        state["most"] = max(state["most"], state["now"])
        if state["now"] >= 8:
            gate.set()
        await gate.wait()
        state["now"] -= 1
        return args["i"]

    program = RAW + (
        "calls = [frame({'op': 'call', 'id': 1000 + i, 'name': 'slow', 'args': {'i': i}})"
        " for i in range(200)]\n"
        "os.write(fd, b''.join(calls))\n"
        "os.set_blocking(fd, False)\n"
        "await tools.slow(i=-1)"  # answered after the 200 were taken
    )
    try:
        out = await attack(runtime, program, {"slow": slow})
        assert out.result == -1  # type: ignore[union-attr]
        assert state["calls"] == 201
        assert state["most"] == 8
    finally:
        runtime.close()


async def test_the_host_echoes_at_most_200_characters_of_child_text(runtime: PythonRuntime) -> None:
    long_name = "n" * 5000
    out = await attack(
        runtime,
        "try:\n"
        f"    await print.__self__.call({long_name!r}, {{}})\n"
        "except ToolCallError as err:\n"
        "    message = str(err)\n"
        "message",
    )
    assert out.result.startswith('unknown tool "nnnn')  # type: ignore[union-attr]
    assert len(out.result) <= 200 + len('unknown tool "…"')  # type: ignore[union-attr]
    failure = await attack(
        runtime, RAW + f"os.write(fd, frame({{'op': {'z' * 5000!r}}}))\nwhile True: pass"
    )
    assert isinstance(failure, CodeRunFailedError)
    assert failure.message.startswith('code run failed (protocol): unknown frame op "zzz')
    assert len(failure.message) <= 300


@pytest.mark.parametrize("where", ["/dev/shm/fill", "fill"], ids=["dev-shm", "scratch"])
async def test_writes_to_dev_shm_and_scratch_are_capped(where: str) -> None:
    runtime = PythonRuntime(scratch_mb=16)
    try:
        program = (
            "open_ = len.__self__.open\n"
            "written, error = 0, None\n"
            f"f = open_({where!r}, 'wb', buffering=0)\n"
            "try:\n"
            "    while written < 256 * 2**20:\n"
            "        written += f.write(b'\\0' * 2**20)\n"
            "except OSError as err:\n"
            "    error = err.strerror\n"
            "[written, error]"
        )
        out = await attack(runtime, program)
        written, error = out.result  # type: ignore[union-attr,misc]
        assert 0 < written <= 16 * MIB
        assert error in ("No space left on device", "File too large")
        assert not os.path.exists("/dev/shm/fill")  # the host's /dev/shm was never touched
        await still_serves(runtime)
    finally:
        runtime.close()


async def test_dev_shm_and_scratch_share_one_quota() -> None:
    runtime = PythonRuntime(scratch_mb=16)
    try:
        program = (
            "open_ = len.__self__.open\n"
            "open_('a', 'wb').write(b'\\0' * 12 * 2**20)\n"
            "attempt(lambda: open_('/dev/shm/b', 'wb').write(b'\\0' * 12 * 2**20))"
        )
        out = await attack(runtime, program)
        assert "No space left on device" in out.result  # type: ignore[union-attr,operator]
    finally:
        runtime.close()


@pytest.mark.slow
async def test_an_endless_loop_ends_at_the_default_limits() -> None:
    runtime = PythonRuntime()  # timeout_s=30, cpu_s=10
    try:
        start = time.monotonic()
        outcome = await attack(runtime, "while True:\n    pass")
        elapsed = time.monotonic() - start
        if isinstance(outcome, CodeRunFailedError):  # the CPU budget came first
            assert outcome.message.startswith("code run failed (timeout): CPU budget (10s)")
        else:
            assert isinstance(outcome, ToolTimeoutError)
        assert elapsed < 45
        await still_serves(runtime)
    finally:
        runtime.close()


@pytest.mark.parametrize(
    "forged",
    [
        {"op": "ready", "confinement": {"missing": []}},
        {"op": "ready", "confinement": "all of them"},
        {"op": "started"},
        {"op": "failed", "kind": "sandbox", "message": "x"},
        {"op": "done", "has_result": True, "result": {"nan": float("nan")}},
    ],
    ids=["ready again", "ready with a string", "started twice", "unknown kind", "non-json"],
)
async def test_a_forged_frame_ends_the_run_as_protocol(runtime: PythonRuntime, forged) -> None:
    import json

    text = json.dumps(forged)
    outcome = await attack(
        runtime, RAW + f"os.write(fd, frame(json.loads({text!r})))\nwhile True: pass"
    )
    assert isinstance(outcome, CodeRunFailedError)
    assert getattr(outcome, "kind", None) in ("protocol", "invalid-output")
    await still_serves(runtime)
