"""A program on a root host changes no host file's mode, owner or times, and sends to no socket.

The Code Mode rows of the tenant-boundaries red team. On main the child kept uid 0 outside
its user namespace, so it owned every root-owned file it could reach: it ``chmod``-ed and
``utime``-d the host's ``/dev/null`` (bound read-write), ``fchmod``-ed its inherited fd 0
(the host's ``/dev/null``), and ``chmod``-ed ``/proc/version`` in its read-write ``/proc``,
which changes the mode for every procfs mount on the machine. And a datagram socket file in
a read path took what it ``sendto``-ed.

Each attack here sets the mode and times a file already has, so nothing would change even if
it succeeded; the test still restores both afterwards. The control runs the same attacks
with ``confinement="off"`` (the child stays root): they succeed there, so the route is real.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.code._helpers import child_pids
from tests.code.redteam._kit import attack, still_serves
from toolray.code import PythonRuntime

ATTACKS = {
    "chmod /dev/null": "os.chmod('/dev/null', 0o666)",
    "utime /dev/null": "os.utime('/dev/null', ns=(DEV_NULL_ATIME, DEV_NULL_MTIME))",
    "fchmod fd 0": "os.fchmod(0, 0o666)",
    "futime fd 0": "os.utime(0, ns=(DEV_NULL_ATIME, DEV_NULL_MTIME))",
    "chmod /proc/version": "os.chmod('/proc/version', 0o444)",
    "chown /dev/null": "os.chown('/dev/null', 0, 0)",
    "chmod / (its root)": "os.chmod('/', 0o755)",
}


@pytest.fixture
def host_files() -> Iterator[str]:
    """The two host files attacked, restored afterwards; the times the program may name."""
    null, version = os.stat("/dev/null"), os.stat("/proc/version")
    assert (null.st_mode & 0o7777, version.st_mode & 0o7777) == (0o666, 0o444)
    names = f"DEV_NULL_ATIME = {null.st_atime_ns}\nDEV_NULL_MTIME = {null.st_mtime_ns}\n"
    try:
        yield names
    finally:
        os.chmod("/dev/null", 0o666)
        os.utime("/dev/null", ns=(null.st_atime_ns, null.st_mtime_ns))
        os.chmod("/proc/version", 0o444)


def _report(outcome: object) -> dict[str, str]:
    result = getattr(outcome, "result", None)
    assert isinstance(result, dict), outcome
    return result


def _program(names: str) -> str:
    lines = [f"{name!r}: attempt(lambda: {action})" for name, action in ATTACKS.items()]
    return names + "{" + ", ".join(lines) + "}"


@pytest.mark.skipif(os.geteuid() != 0, reason="the rows of a root host")
async def test_no_host_files_mode_owner_or_times_can_be_changed(
    runtime: PythonRuntime, host_files: str
) -> None:
    report = _report(await attack(runtime, _program(host_files)))
    for name, what in report.items():
        assert what.startswith("blocked: "), (name, what)
        assert "Read-only file system" in what or "Operation not permitted" in what, what
    await still_serves(runtime)


@pytest.mark.skipif(os.geteuid() != 0, reason="the rows of a root host")
async def test_without_confinement_the_same_routes_succeed(host_files: str) -> None:
    runtime = PythonRuntime(confinement="off")
    try:
        report = _report(await attack(runtime, _program(host_files)))
        for name in ("chmod /dev/null", "utime /dev/null", "fchmod fd 0", "chmod /proc/version"):
            assert report[name] == "LEAK: None", (name, report[name])
    finally:
        runtime.close()


async def test_the_child_is_nobody_outside_its_namespace_and_owns_its_scratch(
    runtime: PythonRuntime,
) -> None:
    async def outside(args: object) -> list[int]:  # the host looks at its running children
        return sorted({psutil.Process(pid).uids().real for pid in child_pids()})

    program = (
        "[os.getuid(), await tools.outside(), os.stat('.').st_uid,"
        " attempt(lambda: len.__self__.open('/dev/urandom', 'rb').read(4) and 'read'),"
        " attempt(lambda: os.chmod('.', 0o700))]"
    )
    outcome = await attack(runtime, program, {"outside": outside})
    inside, uids, scratch, urandom, own = _list(outcome)
    assert (inside, scratch) == (65534, 65534)
    assert uids == [65534]  # not root outside its namespace: it owns no host file
    assert urandom == "LEAK: 'read'"  # its devices work; only their metadata is the host's
    assert own == "LEAK: None"  # its own scratch is its own


def _list(outcome: object) -> list[object]:
    result = getattr(outcome, "result", None)
    assert isinstance(result, list), outcome
    return result


async def test_a_socket_file_in_a_read_path_takes_nothing(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    tmp_path.chmod(0o755)
    path = shared / "host.sock"
    host = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    host.bind(str(path))
    path.chmod(0o777)  # any user may write to it: only the sandbox stands in the way
    host.setblocking(False)
    runtime = PythonRuntime(read_paths=[shared])
    try:
        program = (
            "socket = sys.modules['socket']\n"
            "a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
            f"[attempt(lambda: a.sendto(b'leak', {str(path)!r})),"
            " attempt(lambda: a.send(b'own') and b.recv(8))]"
        )
        sent, own = _list(await attack(runtime, program))
        assert isinstance(sent, str)
        assert sent.startswith("blocked: PermissionError"), sent
        assert own == "LEAK: b'own'"  # the control: its own socket pair works
        with pytest.raises(BlockingIOError):
            host.recv(64)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        client.sendto(b"reachable", str(path))  # the control: the file takes datagrams
        client.close()
        assert host.recv(64) == b"reachable"
    finally:
        runtime.close()
        host.close()
