"""The durable event log: ``MemoryEventLog``, ``JsonlEventLog`` and ``read_jsonl``.

The durability test SIGKILLs a real child process in the middle of a batch and re-reads the
file. It synchronises on a pipe (the child's stdout), bounded by ``select``, never on time.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolray import JsonlEventLog, LogStep, MemoryEventLog, ToolBatchInput, ToolCall, read_jsonl

from ._batch_helpers import Rig

CHILD = Path(__file__).with_name("_eventlog_child.py")


async def _run_into(rig: Rig, sink: Any) -> None:
    batch = ToolBatchInput(
        rig.batch("1", "w2", "3").calls,
        rig.ctl.signal,
        scope="agent",
        log=LogStep(2, 5, sink),
    )
    await rig.reg.execute_batch(batch)


async def test_api_7_jsonl_log_holds_the_same_records_as_the_memory_log(tmp_path: Path) -> None:
    memory = MemoryEventLog()
    async with Rig(fail={"3"}) as rig:
        await _run_into(rig, memory)
    path = tmp_path / "log.jsonl"
    async with Rig(fail={"3"}) as rig:
        with JsonlEventLog(path) as sink:
            await _run_into(rig, sink)
    assert read_jsonl(path) == json.loads(json.dumps(memory.events))
    assert [e["type"] for e in memory.events] == ["tool/call", "tool/result"] * 3


async def test_api_7_jsonl_log_fsyncs_at_the_batch_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    sink = JsonlEventLog(tmp_path / "log.jsonl")
    try:
        async with Rig() as rig:
            await _run_into(rig, sink)
        assert synced, "no fsync at the end of the batch"
        assert len(read_jsonl(tmp_path / "log.jsonl")) == 6
    finally:
        sink.close()


async def test_api_7_jsonl_log_records_any_json_string(tmp_path: Path) -> None:
    """A lone surrogate is a valid JSON string (``"\\ud800"``) and a valid ``JsonValue``."""
    path = tmp_path / "log.jsonl"
    async with Rig() as rig:
        with JsonlEventLog(path) as sink:
            batch = ToolBatchInput(
                [ToolCall("c1", "rec", '{"key": "\\ud800"}')],
                rig.ctl.signal,
                scope="agent",
                log=LogStep(1, 1, sink),
            )
            result = await rig.reg.execute_batch(batch)
    assert result.results[0].result.value == "\ud800"
    events = read_jsonl(path)
    assert [e["type"] for e in events] == ["tool/call", "tool/result"]
    assert events[1]["result"]["content"] == [{"type": "text", "text": "\ud800"}]


def test_api_7_read_jsonl_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text('{"type": "tool/call", "callId": "c1"}\n{"type": "tool/res')
    assert read_jsonl(path) == [{"type": "tool/call", "callId": "c1"}]


def _read_line_with_timeout(proc: subprocess.Popen[bytes], timeout: float) -> bytes:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise AssertionError("the child never reached the middle of its batch")
    return proc.stdout.readline()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL and select on pipes")
def test_api_7_jsonl_log_survives_sigkill_mid_batch(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = _read_line_with_timeout(proc, 60)
        assert line == b"midway\n", proc.stderr.read() if proc.stderr else line
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    events = [json.loads(line) for line in raw.decode().splitlines()]  # every line parses
    seen_calls: set[str] = set()
    for event in events:
        if event["type"] == "tool/call":
            seen_calls.add(event["callId"])
        else:
            assert event["type"] == "tool/result"
            assert event["callId"] in seen_calls, f"result before call: {event['callId']}"
    results = [e["callId"] for e in events if e["type"] == "tool/result"]
    assert results == ["cr1", "cr2", "cr3"]  # the committed calls are all there
    assert [e["callId"] for e in events if e["type"] == "tool/call"] == [
        "cr1",
        "cr2",
        "cr3",
        "cw4",
    ]
    assert read_jsonl(path) == events
