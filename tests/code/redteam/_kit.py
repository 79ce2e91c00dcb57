"""The red team's kit: how hostile programs reach ``os``, ``ctypes`` and machine code.

A program written by a prompt-injected model gets at everything the child process holds:
``random._os`` is the real ``os``, ``os.sys.modules`` every loaded module (``ctypes``
included), and ``ctypes`` can map executable memory and jump into it. None of that is
stopped in Python; these tests show the kernel layers stop what it is used for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolray import AbortController
from toolray.code import CodeRunOutcome, PythonRuntime
from toolray.errors import CodeRunFailedError, ToolTimeoutError

PRELUDE = r'''
import random
os = random._os
sys = os.sys
ctypes = sys.modules["ctypes"]
libc = ctypes.CDLL(None, use_errno=True)

def attempt(action):
    """What the attack got: "blocked: <exception>" or "LEAK: <value>"."""
    try:
        value = action()
    except BaseException as err:
        return "blocked: " + type(err).__name__ + ": " + str(err)[:160]
    return "LEAK: " + repr(value)[:300]

def syscall(nr, *args):
    """A raw native syscall: its result, or minus its errno."""
    libc.syscall.restype = ctypes.c_long
    result = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return -ctypes.get_errno() if result == -1 else result

def machine_code(code):
    """Run ``code`` (bytes of x86_64 machine code ending in ret) and return rax."""
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 7, 0x22, -1, 0)  # read, write, execute; private, anonymous
    ctypes.memmove(page, code, len(code))
    return ctypes.CFUNCTYPE(ctypes.c_long)(page)()

def int80(nr, *args):
    """The i386 entry: mov eax, nr; mov ebx/ecx/edx, args; int 0x80; ret (i386 numbers:
    2 fork, 37 kill, 66 setsid, 359 socket)."""
    code = b"\xb8" + nr.to_bytes(4, "little")
    for opcode, value in zip((b"\xbb", b"\xb9", b"\xba"), args):
        code += opcode + (value & 0xFFFFFFFF).to_bytes(4, "little")
    return code + b"\xcd\x80\xc3"

def x32(nr):
    """An x32 syscall number: mov eax, 0x40000000 | nr; syscall; ret."""
    return b"\xb8" + (0x40000000 | nr).to_bytes(4, "little") + b"\x0f\x05\xc3"
'''


async def attack(
    runtime: PythonRuntime, program: str, bindings: Mapping[str, Any] | None = None
) -> CodeRunOutcome | CodeRunFailedError | ToolTimeoutError:
    """Run ``PRELUDE + program``: its outcome, or the failure the run ended with."""
    try:
        return await runtime.run(PRELUDE + program, bindings or {}, AbortController().signal)
    except (CodeRunFailedError, ToolTimeoutError) as err:
        return err


def blocked(outcome: object) -> str:
    """The attack's report; it must say the attack was blocked."""
    assert isinstance(outcome, CodeRunOutcome), outcome
    report = outcome.result
    assert isinstance(report, str)
    assert report.startswith("blocked: "), report
    return report


def killed(outcome: object) -> str:
    """The run must have ended with the process killed for its syscall entry."""
    assert isinstance(outcome, CodeRunFailedError), outcome
    assert getattr(outcome, "kind", None) == "worker-exit"
    assert "python exited (signal SIGSYS)" in outcome.message, outcome.message
    return outcome.message


async def still_serves(runtime: PythonRuntime) -> None:
    """The runtime (and its next warm child) is unharmed: a plain program runs as usual."""
    out = await runtime.run("print('after')\n6 * 7", {}, AbortController().signal)
    assert (out.logs, out.result) == (["after"], 42)
