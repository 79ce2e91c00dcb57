"""Bodies that look for what a sandbox must hide (pickled by value into Ray's actors).

Each returns what it reached: ``"READ"``/``"OK"`` where the route worked, the exception's
name where it was stopped. The tests run them with ``isolation="call"`` (the control: the
routes are real) and ``"sandbox"``.
"""

from __future__ import annotations

import json
from typing import Any

from toolray import Placement, ToolDefinition, ToolOutput, text_block


def _attempt(action: Any) -> str:
    try:
        result = action()
    except BaseException as err:  # what stopped it
        return type(err).__name__
    return "OK" if result is None else str(result)[:200]


def secrets(args: Any, ctx: Any) -> Any:
    """The worker's environment, Ray's token and sessions, the worker's process."""
    import os
    import signal

    worker = int(args["worker"])
    token = str(args["token"])
    return {
        "ray_env": sorted(k for k in os.environ if k.startswith("RAY_")),
        "token": _attempt(lambda: open(token).read() and "READ"),
        "sessions": _attempt(lambda: os.listdir("/tmp/ray") and "READ"),
        "worker_environ": _attempt(lambda: open(f"/proc/{worker}/environ", "rb").read() and "READ"),
        "worker_mem": _attempt(lambda: open(f"/proc/{worker}/mem", "rb") and "READ"),
        "signal_worker": _attempt(lambda: os.kill(worker, 0)),
        "signal_worker_cont": _attempt(lambda: os.kill(worker, signal.SIGCONT)),
        "pids": len([p for p in os.listdir("/proc") if p.isdigit()]),
    }


def host_files(args: Any, ctx: Any) -> Any:
    """Mode, times and ownership of host files; the canaries, granted and not."""
    import os

    times = (int(args["atime"]), int(args["mtime"]))
    granted, secret, out = args["granted"], args["secret"], args["out"]
    return {
        "chmod_null": _attempt(lambda: os.chmod("/dev/null", 0o666)),
        "utime_null": _attempt(lambda: os.utime("/dev/null", ns=times)),
        "fchmod_0": _attempt(lambda: os.fchmod(0, 0o666)),
        "chmod_version": _attempt(lambda: os.chmod("/proc/version", 0o444)),
        "read_granted": _attempt(lambda: open(granted).read()),
        "read_secret": _attempt(lambda: open(secret).read()),
        "write_granted": _attempt(lambda: open(out, "w").write("written") and None),
        "write_beside_secret": _attempt(
            lambda: open(os.path.join(os.path.dirname(secret), "planted"), "w").write("x")
        ),
    }


def network(args: Any, ctx: Any) -> Any:
    """A TCP connection to the test's listener on the host's loopback."""
    import socket

    def connect() -> str:
        with socket.create_connection(("127.0.0.1", int(args["port"])), timeout=10) as sock:
            sock.sendall(b"hello from the body")
        return "SENT"

    return {"connect": _attempt(connect)}


def daemon(args: Any, ctx: Any) -> Any:
    """A double-forked ``setsid`` daemon that holds a lock on a granted file, forever."""
    import fcntl
    import os
    import time

    lock = args["lock"]
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            held = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
            fcntl.flock(held, fcntl.LOCK_EX)
            os.write(write_end, b"locked")
            while True:
                time.sleep(3600)
        os._exit(0)
    return os.read(read_end, 16).decode()


def hangs(args: Any, ctx: Any) -> Any:
    """Ignores its deadline (one C-level sleep): the ladder kills its sandbox."""
    import time

    time.sleep(60)


def _render(args: Any, value: Any) -> list[Any]:
    return [text_block(json.dumps(value, sort_keys=True))]


def tools(placement: Placement, prefix: str = "") -> list[ToolDefinition]:
    """Every probe on ``placement`` (names prefixed with ``prefix``)."""
    bodies = {"secrets": secrets, "host_files": host_files, "network": network}
    bodies |= {"daemon": daemon, "hangs": hangs}
    return [
        ToolDefinition(
            name=prefix + name,
            description=name,
            parameters={"type": "object"},
            output=ToolOutput(schema={}, render=_render),
            execute=body,
            placement=placement,
            timeout_ms=800 if name == "hangs" else None,
        )
        for name, body in bodies.items()
    ]
