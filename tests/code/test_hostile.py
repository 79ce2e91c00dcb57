"""Hostile programs: each ends as one structured failure, its process is gone afterwards, and
the runtime serves the next run (issue 13, "Bad input")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.code._helpers import child_pids, run, warm_pids
from toolray.code import PythonRuntime
from toolray.errors import CodeRunFailedError, ToolTimeoutError

ESCAPE = "import random\nos = random._os  # allowed modules leak os: containment is the process\n"
PROTOCOL_FD = "fd = print.__self__.wire.out_fd\n"


@dataclass(frozen=True)
class Case:
    program: str
    error: type[Exception] = CodeRunFailedError
    message: str = ""
    options: dict[str, Any] = field(default_factory=dict)


CASES = {
    "syntax error": Case("def f(:\n  pass", message="code run failed (syntax): SyntaxError: "),
    "exception": Case("[][1]", message="code run failed (exception): IndexError: "),
    "non-JSON last expression": Case(
        "object()", message="code run failed (invalid-output): program completion must be"
    ),
    "import os": Case("import os", message='code run failed (import): module "os"'),
    "infinite loop": Case(
        "while True:\n    pass",
        ToolTimeoutError,
        "code run timed out after 500ms",
        {"timeout_s": 0.5},
    ),
    "blocking sleep": Case(
        "import time\ntime.sleep(60)", ToolTimeoutError, "code run timed out", {"timeout_s": 0.5}
    ),
    "busy loop under cpu_s": Case(
        "while True:\n    pass",
        message="code run failed (timeout): CPU budget (1s) exhausted",
        options={"cpu_s": 1},
    ),
    "fork bomb": Case(
        ESCAPE + "while True:\n    os.fork()",
        message="code run failed (exception): PermissionError: [Errno 1] Operation not permitted",
    ),
    "exec": Case(
        ESCAPE + "os.execv('/bin/sh', ['sh'])",
        message="code run failed (exception): PermissionError: [Errno 1] Operation not permitted",
    ),
    "subprocess through asyncio": Case(
        "import asyncio\nawait asyncio.create_subprocess_shell('yes')",
        message="code run failed (exception): PermissionError: subprocesses are not available",
    ),
    "signal to the host": Case(
        ESCAPE + "os.kill(os.getppid(), 9)",
        message="code run failed (exception): PermissionError: [Errno 1] Operation not permitted",
    ),
    "one huge allocation": Case(
        "x = 'x' * 10**10", message="code run failed (memory): MemoryError: the program ran out"
    ),
    "growing list": Case(
        "hog = []\nwhile True:\n    hog.append('x' * 10**6)",
        message="code run failed (memory): MemoryError: the program ran out of memory (128 MiB)",
        options={"memory_mb": 128},
    ),
    "deep recursion": Case(
        "def f():\n    return f()\nf()", message="code run failed (exception): RecursionError"
    ),
    "SystemExit": Case("raise SystemExit(3)", message="code run failed (exception): SystemExit: 3"),
    "exit()": Case("exit()", message="code run failed (exception): NameError: name 'exit'"),
    "os._exit": Case(
        ESCAPE + "os._exit(0)",
        message="code run failed (worker-exit): python exited (code 0) before completing",
    ),
    "abort()": Case(
        ESCAPE + "os.abort()", message="code run failed (worker-exit): python exited (signal"
    ),
    "closing every descriptor": Case(
        ESCAPE + "for fd in range(64):\n    if fd != 2:\n        try:\n            os.close(fd)\n"
        "        except OSError:\n            pass\nprint('lost')",
        message="code run failed (worker-exit): python exited (code 85)",
    ),
    "garbage frame": Case(
        ESCAPE + PROTOCOL_FD + "os.write(fd, b'\\x00\\x00\\x00\\x05hello')\nwhile True:\n    pass",
        message="code run failed (protocol): a frame is not UTF-8 JSON",
    ),
    "oversized frame": Case(
        ESCAPE + PROTOCOL_FD + "os.write(fd, b'\\xff\\xff\\xff\\xff')\nwhile True:\n    pass",
        message="code run failed (protocol): a frame of 4294967295 bytes exceeds",
    ),
    "forged frame": Case(
        ESCAPE + PROTOCOL_FD + "import json\nb = json.dumps({'op': 'done'}).encode()\n"
        "os.write(fd, len(b).to_bytes(4, 'big') + b)\nwhile True:\n    pass",
        message='code run failed (protocol): frame "done" has no bool "has_result"',
    ),
    "unknown op": Case(
        ESCAPE + PROTOCOL_FD + 'os.write(fd, b\'\\x00\\x00\\x00\\x0c{"op":"zap"}\')\n'
        "while True:\n    pass",
        message='code run failed (protocol): unknown frame op "zap"',
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_a_hostile_program_is_contained(case: Case) -> None:
    before = child_pids()
    runtime = PythonRuntime(**({"timeout_s": 60} | case.options))
    try:
        used = await warm_pids(runtime)  # the warm child this run will use
        with pytest.raises(case.error) as caught:
            await run(runtime, case.program)
        assert str(caught.value).startswith(case.message)
        assert used.isdisjoint(child_pids())  # killed and reaped
        out = await run(runtime, "print('next')\n6 * 7")  # and the runtime keeps serving
        assert (out.logs, out.result) == (["next"], 42)
    finally:
        runtime.close()
    assert child_pids() - before == set()


async def test_huge_output_is_truncated_not_fatal(runtime: PythonRuntime) -> None:
    out = await run(runtime, "for i in range(10**5):\n    print('x' * 1000)\n'survived'")
    assert out.result == "survived"
    assert out.logs[-1] == "[toolray.code] log capture truncated at 1048576 bytes"
    assert 1000 <= len(out.logs) <= 1100
    assert set(out.logs[:-1]) == {"x" * 1000}


async def test_closing_fd_1_does_not_touch_the_protocol(runtime: PythonRuntime) -> None:
    out = await run(runtime, ESCAPE + "os.close(1)\nos.close(0)\nprint('still here')\n1")
    assert (out.logs, out.result) == (["still here"], 1)


async def test_the_environment_holds_no_host_secrets(
    runtime: PythonRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRAY_TEST_SECRET", "hunter2")
    fresh = PythonRuntime(warm=0)
    try:
        out = await run(fresh, ESCAPE + "sorted(os.environ)")
    finally:
        fresh.close()
    assert out.result == ["HOME", "LANG", "LC_ALL", "PATH", "TMPDIR"]
