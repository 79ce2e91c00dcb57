"""Child entries for the substrate tests, loaded by path into a template (standard library only)."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")
LOADED: dict[str, Any] = {}


def remember(args: Any) -> None:
    """The init hook: what it stores, every child inherits."""
    LOADED["init"] = args
    LOADED["template_pid"] = os.getpid()


def _frames(fd: int):
    buffer = b""
    while True:
        data = os.read(fd, 65536)
        if not data:
            return
        buffer += data
        while len(buffer) >= 4:
            (size,) = HEADER.unpack_from(buffer)
            if len(buffer) < 4 + size:
                break
            yield buffer[4 : 4 + size]
            buffer = buffer[4 + size :]


def _send(fd: int, payload: bytes) -> None:
    try:
        os.write(fd, HEADER.pack(len(payload)) + payload)
    except BrokenPipeError:  # the host has closed the channel already
        os._exit(0)


def echo(ctx: Any) -> int:
    """Serve frames until EOF: each payload comes back with a note of who served it."""
    for payload in _frames(ctx.channel):
        head, sep, tail = payload.partition(b"\n")
        message = json.loads(head)
        message["served_by"] = os.getpid()
        _send(ctx.channel, json.dumps(message).encode() + sep + tail)
    return 0


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def report(ctx: Any) -> int:
    """Send one frame describing this child, then wait for the host to close."""
    facts = {
        "op": "facts",
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "fds": [fd for fd in range(256) if _is_open(fd)],
        "args": ctx.args,
        "loaded": LOADED,
        "pidns_error": ctx.pid_namespace_error,
    }
    _send(ctx.channel, json.dumps(facts).encode())
    os.read(ctx.channel, 1)
    return 0


def exit_with(ctx: Any) -> int:
    return int(ctx.args)


def crash(ctx: Any) -> int:
    ctypes.string_at(0)  # a real segmentation fault
    return 0


def fail(ctx: Any) -> int:
    print("about to fail", flush=True)
    raise RuntimeError("the entry raised")


def hang_with_grandchild(ctx: Any) -> int:
    """Fork a grandchild in the same process group, tell the host both pids, then block."""
    grandchild = os.fork()
    if grandchild == 0:
        signal.pause()
        os._exit(0)
    _send(
        ctx.channel,
        json.dumps({"op": "pids", "child": os.getpid(), "grandchild": grandchild}).encode(),
    )
    while True:
        time.sleep(3600)


def titled(ctx: Any) -> int:
    fitted = ctx.set_title(
        ["python", "worker.py", "--role", "titled"], {"ROLE": "titled", "N": "1"}
    )
    _send(
        ctx.channel,
        json.dumps({"op": "titled", "fitted": fitted, "env": dict(os.environ)}).encode(),
    )
    os.read(ctx.channel, 1)
    return 0


def keep(args: Any, data: bytes | None) -> None:
    """A loader: what it stores in the template, children forked afterwards inherit."""
    if args == "fail":
        raise ValueError("this load fails (the template lives on)")
    LOADED.setdefault("loads", []).append([args, None if data is None else len(data)])


def loaded(ctx: Any) -> int:
    """Report what the template had loaded when this child was forked, then exit."""
    _send(ctx.channel, json.dumps(LOADED.get("loads", [])).encode())
    return 0


def hang_with_daemon(ctx: Any) -> int:
    """Double-fork a ``setsid`` daemon (out of the child's group), tell the host its pid, block."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.write(write_end, str(os.getpid()).encode())
            while True:
                time.sleep(3600)
        os._exit(0)
    daemon = int(os.read(read_end, 64))
    _send(ctx.channel, json.dumps({"op": "pids", "child": os.getpid(), "daemon": daemon}).encode())
    while True:
        time.sleep(3600)


def fork_a_copy(ctx: Any) -> int:
    """Fork a copy of itself (its own group), tell the host its pid, leave once the host says.

    The copy outlives this process: re-parented to the template, it blocks until killed.
    With ``args == "exit"`` it exits at once instead.
    """
    if ctx.args == "exit":
        return 0
    left_r, left_w = os.pipe()
    copy = os.fork()
    if copy == 0:
        # out of this process's group first: the template kills that group when this
        # process ends, and must not reach the copy
        os.setpgid(0, 0)
        os.close(left_w)
        while True:
            time.sleep(3600)
    os.close(left_w)
    os.read(left_r, 1)  # EOF once the copy has its own group (a loaded machine may be slow)
    _send(ctx.channel, json.dumps({"op": "pids", "copy": copy}).encode())
    os.read(ctx.channel, 1)  # the host has had the template adopt it
    return 0


def hang_with_session(ctx: Any) -> int:
    """Start a ``setsid`` child that stays this one's (a daemon still below a running call)."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        os.write(write_end, str(os.getpid()).encode())
        while True:
            time.sleep(3600)
    session = int(os.read(read_end, 64))
    pids = {"op": "pids", "child": os.getpid(), "session": session}
    _send(ctx.channel, json.dumps(pids).encode())
    while True:
        time.sleep(3600)
