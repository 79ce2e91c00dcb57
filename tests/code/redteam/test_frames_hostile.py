"""A program's frames against the host: floods of values, lone surrogates, forged failures.

The rows of the tenant-boundaries red team that a program plays on its channel. A frame of
16 MiB of ``{},{},…`` is within the byte budget but would be 5.6 million objects in the
host: the host refuses it from its bytes, before it builds one (the control shows the same
bytes cost the host hundreds of MiB when decoded naively). Text a model reads never holds a
lone surrogate, and a forged ``failed`` frame's message is cut.
"""

from __future__ import annotations

import json

import psutil
import pytest

from tests.code.redteam._kit import attack, still_serves
from toolray.code import CodeRunOutcome, PythonRuntime
from toolray.errors import CodeRunFailedError
from toolray.procs import MAX_ELEMENTS, MAX_FRAME_BYTES, FrameDecoder, ProtocolError

MIB = 1024 * 1024
RAW = (
    "import json\n"
    "fd = print.__self__.wire.out_fd\n"
    "os.set_blocking(fd, True)\n"
    "def frame(data):\n"
    "    return len(data).to_bytes(4, 'big') + data\n"
)
FLOOD = 'b\'{"op":"done","has_result":true,"result":[\' + b\'{},\' * N + b\'{}]}\''
"""A ``done`` frame whose result is ``N + 1`` empty objects (3 bytes each)."""


def _flood(n: int) -> bytes:
    payload = b'{"op":"done","has_result":true,"result":[' + b"{}," * n + b"{}]}"
    return len(payload).to_bytes(4, "big") + payload


def test_the_flood_costs_a_naive_reader_hundreds_of_mib() -> None:
    # the control: the same bytes, decoded without the bounds, become millions of objects
    payload = _flood(5_000_000)[4:]
    assert len(payload) < MAX_FRAME_BYTES
    host = psutil.Process()
    before = host.memory_info().rss
    value = json.loads(payload)
    grew = host.memory_info().rss - before
    assert len(value["result"]) == 5_000_001
    assert grew > 200 * MIB
    del value
    with pytest.raises(ProtocolError, match=f"exceeds {MAX_ELEMENTS} values"):
        FrameDecoder().feed(_flood(5_000_000))


async def test_three_16_mib_floods_cost_the_host_no_more_than_their_bytes(
    runtime: PythonRuntime,
) -> None:
    host = psutil.Process()
    before = host.memory_info().rss
    program = (
        RAW
        + "N = 5_500_000\n"
        + f"data = frame({FLOOD})\n"
        + "for _ in range(3):\n"
        + "    os.write(fd, data)\n"
        + "while True: pass"
    )
    outcome = await attack(runtime, program)
    assert isinstance(outcome, CodeRunFailedError), outcome
    assert outcome.message.startswith("code run failed (protocol): a frame of ")
    assert f"exceeds {MAX_ELEMENTS} values" in outcome.message
    assert host.memory_info().rss - before < 64 * MIB  # the refused frame's bytes, at most
    await still_serves(runtime)


async def test_lone_surrogates_never_reach_the_model(runtime: PythonRuntime) -> None:
    program = (
        RAW
        + 'os.write(fd, frame(b\'{"op":"log","text":"a\\\\ud800b"}\'))\n'
        + 'os.write(fd, frame(\'{"op":"log","text":"raw \\udfff"}\'.encode(\'utf-8\', '
        "'surrogatepass')))\n"
        + "done = {'op': 'done', 'has_result': True, 'result': {'k\\udc00': ['v\\ud83d']}}\n"
        + "os.write(fd, frame(json.dumps(done, ensure_ascii=False).encode('utf-8', "
        "'surrogatepass')))\n" + "while True: pass"
    )
    outcome = await attack(runtime, program)
    assert isinstance(outcome, CodeRunOutcome), outcome
    assert outcome.logs == ["a\ufffdb", "raw \ufffd"]
    assert outcome.result == {"k\ufffd": ["v\ufffd"]}
    json.dumps([outcome.logs, outcome.result], ensure_ascii=False).encode("utf-8")


async def test_a_forged_failure_of_4_mib_is_cut_to_an_echo(runtime: PythonRuntime) -> None:
    program = (
        RAW
        + "text = json.dumps({'op': 'failed', 'kind': 'exception', 'message': 'm' * (4 << 20)})\n"
        + "os.write(fd, frame(text.encode()))\n"
        + "while True: pass"
    )
    outcome = await attack(runtime, program)
    assert isinstance(outcome, CodeRunFailedError), outcome
    assert outcome.message.startswith("code run failed (exception): mmm")
    assert len(outcome.message) <= 250
    await still_serves(runtime)
