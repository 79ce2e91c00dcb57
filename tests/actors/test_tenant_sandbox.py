"""``isolation="sandbox"``: the rows a call process leaves open are closed in a sandbox.

Through the real runtime, each probe runs with ``isolation="call"`` — the control: a call
process reads the worker's Ray environment, Ray's token and sessions and the worker's own
``/proc`` entries, signals the worker, sees every process, writes beside a canary — and
with ``isolation="sandbox"``, where each of those fails and only what the placement grants
(``read_paths``, ``write_paths``, ``network``) is reachable. What a sandboxed body starts
dies with it; a body that ignores its deadline is killed with its sandbox.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.actors import _sandbox_tools
from toolray import Placement, TimeoutPolicy, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(_sandbox_tools)
WAIT_S = 30.0
STOPPED = ("PermissionError", "FileNotFoundError", "ProcessLookupError", "OSError")


def _call(rt: Any, scope: str, name: str, args: dict[str, Any]) -> Any:
    out = rt.executor(scope).execute_batch_sync(ToolBatchInput([ToolCall("c1", name, args)]))
    return out.results[0].result


def _worker_pid(rt: Any) -> int:
    return next(a.pid for a in rt.stats().actors if a.kind == "worker")


@pytest.fixture
def probes(rt: Any, scope_key: str) -> str:
    """The probes on a call pool (``call_*``) and on a sandbox pool, in one scope."""
    scope = rt.registry.scope(scope_key)
    for tool in _sandbox_tools.tools(Placement(size=1, spare=0), "call_"):
        rt.owned.append(scope.register(tool))
    for tool in _sandbox_tools.tools(Placement(isolation="sandbox", size=1, spare=0)):
        rt.owned.append(scope.register(tool))
    rt.owned.append(TimeoutPolicy().install(scope))
    for name in ("call_network", "network"):  # both pools are up (their workers exist)
        _call(rt, scope_key, name, {"port": 1})
    return scope_key


def test_a_sandbox_sees_none_of_the_workers_secrets(rt: Any, probes: str) -> None:
    args = {"worker": _worker_pid(rt), "token": str(Path.home() / ".ray" / "auth_token")}
    control = _call(rt, probes, "call_secrets", args).value
    assert control["ray_env"], control  # a call process holds the worker's Ray environment
    assert control["token"] == control["sessions"] == "READ"
    assert control["worker_environ"] == control["worker_mem"] == "READ"
    assert control["signal_worker"] == control["signal_worker_cont"] == "OK"
    assert control["pids"] > 10  # it sees every process of the host
    boxed = _call(rt, probes, "secrets", args).value
    assert boxed["ray_env"] == []
    for route in ("token", "sessions", "worker_environ", "worker_mem", "signal_worker"):
        assert boxed[route] in STOPPED, (route, boxed)
    assert boxed["signal_worker_cont"] in STOPPED
    assert boxed["pids"] == 1  # itself, pid 1 of its own namespace: no sibling, no worker


@pytest.mark.skipif(os.geteuid() != 0, reason="the rows of a root host")
def test_a_sandbox_changes_no_host_file_and_reaches_only_its_grants(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    granted, hidden, out = tmp_path / "granted", tmp_path / "hidden", tmp_path / "out"
    for directory in (granted, hidden, out):
        directory.mkdir(mode=0o777)
        directory.chmod(0o777)  # uid 65534 may read and write: only the sandbox stands between
    (granted / "data.txt").write_text("for the body")
    (hidden / "secret.txt").write_text("canary")
    placement = Placement(
        isolation="sandbox", size=1, spare=0, read_paths=(str(granted),), write_paths=(str(out),)
    )
    for tool in _sandbox_tools.tools(placement, "grants_"):
        rt.owned.append(rt.registry.scope(scope_key).register(tool))
    null = os.stat("/dev/null")
    args = {"atime": null.st_atime_ns, "mtime": null.st_mtime_ns}
    args |= {"granted": str(granted / "data.txt"), "secret": str(hidden / "secret.txt")}
    args["out"] = str(out / "result.txt")
    try:
        seen = _call(rt, scope_key, "grants_host_files", args).value
    finally:  # the same mode and times it has: nothing changes even if a route worked
        os.chmod("/dev/null", 0o666)
        os.utime("/dev/null", ns=(null.st_atime_ns, null.st_mtime_ns))
        os.chmod("/proc/version", 0o444)
    for route in ("chmod_null", "utime_null", "fchmod_0", "chmod_version"):
        assert seen[route] in ("OSError", "PermissionError"), (route, seen)
    assert seen["read_granted"] == "for the body"
    assert seen["read_secret"] == "FileNotFoundError"  # not even there, in its root
    assert seen["write_granted"] == "OK"
    assert (out / "result.txt").read_text() == "written"
    assert seen["write_beside_secret"] in STOPPED
    assert sorted(p.name for p in hidden.iterdir()) == ["secret.txt"]
    assert (hidden / "secret.txt").read_text() == "canary"


@pytest.fixture
def listener() -> Iterator[tuple[int, list[bytes]]]:
    """A TCP listener on the host's loopback; what connections send to it."""
    server = socket.create_server(("127.0.0.1", 0))
    received: list[bytes] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(64))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], received
    with contextlib.suppress(OSError):  # wakes the blocked accept (a close alone does not)
        server.shutdown(socket.SHUT_RDWR)
    server.close()
    thread.join(WAIT_S)
    assert not thread.is_alive()


def test_the_network_is_the_placements_to_grant(
    rt: Any, probes: str, listener: tuple[int, list[bytes]]
) -> None:
    port, received = listener
    assert _call(rt, probes, "call_network", {"port": port}).value["connect"] == "SENT"
    closed = _call(rt, probes, "network", {"port": port}).value["connect"]
    assert closed in STOPPED, closed  # no network at all, not even the host's loopback
    placement = Placement(isolation="sandbox", size=1, spare=0, network=True)
    rt.owned.append(rt.registry.scope(probes).register(_sandbox_tools.tools(placement, "net_")[2]))
    assert _call(rt, probes, "net_network", {"port": port}).value["connect"] == "SENT"
    deadline = time.monotonic() + WAIT_S
    while len(received) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert received == [b"hello from the body"] * 2


def test_what_a_sandbox_starts_dies_with_it(rt: Any, scope_key: str, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)
    placement = Placement(isolation="sandbox", size=1, spare=0, write_paths=(str(shared),))
    for tool in _sandbox_tools.tools(placement, "daemon_"):
        rt.owned.append(rt.registry.scope(scope_key).register(tool))
    lock = shared / "daemon.lock"
    assert _call(rt, scope_key, "daemon_daemon", {"lock": str(lock)}).value == "locked"
    held = os.open(lock, os.O_RDWR)
    try:
        deadline = time.monotonic() + WAIT_S
        while True:  # its lock is free once the daemon died (with its sandbox)
            try:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the daemon outlived its sandbox"
                time.sleep(0.01)
    finally:
        os.close(held)


def test_a_sandbox_that_ignores_its_deadline_is_killed(rt: Any, probes: str) -> None:
    result = _call(rt, probes, "hangs", {})
    assert result.error.info.code == "TOOL_TIMEOUT"
    assert _call(rt, probes, "network", {"port": 1}).value["connect"] in STOPPED  # serves on


def test_confinement_reports_every_layer_on_this_machine(rt: Any) -> None:
    confinement = rt.confinement()
    assert confinement.mode == "auto"
    assert confinement.missing == ()
    assert confinement.describe() == (
        "confinement auto: user, pid, net, mount, ipc namespaces, Landlock ABI "
        f"{confinement.landlock_abi}, seccomp, no cgroup"
    )
    assert confinement.landlock_abi >= 1
    granted = rt.confinement(Placement(isolation="sandbox", network=True))
    assert not granted.network_namespace  # granted the network: the host's
