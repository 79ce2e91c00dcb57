"""The host process: its memory, its environment, its signals, its sockets; and the syscall
entries that would get around the filter. The test host plays the executor actor."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import psutil
import pytest

import toolray.code
from tests.code._helpers import child_pids
from tests.code.redteam._kit import attack, blocked, killed, still_serves
from toolray.code import PythonRuntime


def _host_pid_binding() -> dict:
    async def host_pid(args):
        return os.getpid()

    return {"host_pid": host_pid}


async def test_the_host_is_invisible_in_the_childs_pid_namespace(runtime: PythonRuntime) -> None:
    out = await attack(
        runtime,
        "host = await tools.host_pid()\n"
        "[os.getpid(), os.getppid(), attempt(lambda: os.listdir('/proc')),"
        " attempt(lambda: os.stat(f'/proc/{host}'))]",
        _host_pid_binding(),
    )
    pid, ppid, listing, host = out.result  # type: ignore[union-attr,misc]
    assert (pid, ppid) == (1, 0)  # pid 1 of its own namespace; its parent is outside it
    assert listing.startswith("blocked: ")
    assert host.startswith("blocked: ")


async def test_the_hosts_environment_cannot_be_read(
    runtime: PythonRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRAY_REDTEAM_SECRET", "hunter2-in-the-host")
    program = (
        "pid = await tools.host_pid()\n"
        "[attempt(lambda: len.__self__.open(f'/proc/{pid}/environ', 'rb').read()),"
        " 'hunter2' in repr(dict(os.environ))]"
    )
    out = await attack(runtime, program, _host_pid_binding())
    report, seen = out.result  # type: ignore[union-attr,misc]
    assert report.startswith("blocked: ")
    assert seen is False
    assert "hunter2" not in repr(out)
    await still_serves(runtime)


@pytest.mark.parametrize("mode", ["rb", "r+b"], ids=["read", "write"])
async def test_the_hosts_memory_cannot_be_opened(runtime: PythonRuntime, mode: str) -> None:
    program = (
        "pid = await tools.host_pid()\n"
        f"attempt(lambda: len.__self__.open(f'/proc/{{pid}}/mem', {mode!r}, buffering=0))"
    )
    blocked(await attack(runtime, program, _host_pid_binding()))
    await still_serves(runtime)


async def test_process_vm_readv_on_the_host_is_denied(runtime: PythonRuntime) -> None:
    program = "pid = await tools.host_pid()\nsyscall(310, pid, 0, 1, 0, 1, 0)"  # process_vm_readv
    out = await attack(runtime, program, _host_pid_binding())
    assert out.result == -1  # type: ignore[union-attr]  # EPERM


SIGNALS = {
    "os.kill": "attempt(lambda: os.kill(pid, 10))",
    "os.killpg": "attempt(lambda: os.killpg(pid, 10))",
    "pidfd_open then pidfd_send_signal": "syscall(434, pid, 0)",
    "tgkill to the host's main thread": "syscall(234, pid, pid, 10)",
    "rt_sigqueueinfo": "syscall(129, pid, 10, 0)",
    "F_SETOWN on its own socket": (
        "attempt(lambda: sys.modules['fcntl'].fcntl(print.__self__.wire.out_fd, 8, pid))"
    ),
    "F_SETSIG on its own socket": (
        "attempt(lambda: sys.modules['fcntl'].fcntl(print.__self__.wire.out_fd, 10, 10))"
    ),
    "F_SETOWN_EX on its own socket": (
        "attempt(lambda: sys.modules['fcntl'].fcntl(print.__self__.wire.out_fd, 15, b'\\0' * 8))"
    ),
    "FIOSETOWN ioctl on its own socket": (
        "attempt(lambda: sys.modules['fcntl'].ioctl(print.__self__.wire.out_fd, 0x8901,"
        " pid.to_bytes(4, 'little')))"
    ),
}


@pytest.mark.parametrize("route", SIGNALS.values(), ids=SIGNALS.keys())
async def test_no_signal_reaches_the_host(runtime: PythonRuntime, sigusr1, route: str) -> None:
    program = (
        f"pid = await tools.host_pid()\nimport asyncio\nr = {route}\nawait asyncio.sleep(0)\nr"
    )
    out = await attack(runtime, "sys.modules['fcntl'] = __import__('fcntl', {})\n" + program,
                       _host_pid_binding())  # fmt: skip
    report = out.result  # type: ignore[union-attr]
    assert report == -1 or str(report).startswith("blocked: "), report
    await still_serves(runtime)
    assert sigusr1.count == 0


async def test_the_i386_entry_kills_the_process_before_kill_runs(
    runtime: PythonRuntime, sigusr1
) -> None:
    program = "pid = await tools.host_pid()\nmachine_code(int80(37, pid, 10))"  # kill(pid, USR1)
    killed(await attack(runtime, program, _host_pid_binding()))
    await still_serves(runtime)
    assert sigusr1.count == 0


async def test_the_i386_entry_opens_no_socket(runtime: PythonRuntime) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        # socket(AF_INET, SOCK_STREAM, 0) through int 0x80, then a connect to the listener
        killed(await attack(runtime, f"machine_code(int80(359, 2, 1, 0))\nport = {port}"))
        connect = f"__import__('socket', {{}}).create_connection(('127.0.0.1', {port}))"
        blocked(await attack(runtime, f"attempt(lambda: {connect})"))
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    await still_serves(runtime)


async def test_the_i386_entry_forks_nothing(runtime: PythonRuntime) -> None:
    before = _ours()
    # fork (2) through int 0x80: a grandchild that setsid()s would outlive the run
    killed(await attack(runtime, "machine_code(int80(2))"))
    survivors = _ours() - before
    assert len(survivors) <= runtime.statistics().warm  # only the warm child booted after it
    assert survivors <= child_pids()  # and that one is the runtime's own
    await still_serves(runtime)


def _ours() -> set[int]:
    """Every process running this checkout's Code Mode child below this test process, or
    orphaned to the machine's init (where a grandchild that left its parent would go).

    Not the machine's every one: Code Mode on Ray, in another test process, has its own.
    """
    runner = str(Path(toolray.code.__file__).with_name("_child.py"))
    below = {p.pid for p in psutil.Process().children(recursive=True)}
    found = set()
    for proc in psutil.process_iter(["cmdline", "ppid"]):
        if runner in (proc.info["cmdline"] or ()) and (proc.pid in below or proc.info["ppid"] == 1):
            found.add(proc.pid)
    return found


async def test_an_x32_syscall_number_kills_the_process(runtime: PythonRuntime) -> None:
    killed(await attack(runtime, "machine_code(x32(39))"))  # x32 getpid
    await still_serves(runtime)


async def test_the_network_namespace_has_no_usable_interface(runtime: PythonRuntime) -> None:
    # Sockets are denied outright; the namespace behind them has only a loopback that is down.
    out = await attack(
        runtime,
        "[attempt(lambda: __import__('socket', {}).socket()),"
        " attempt(lambda: __import__('socket', {}).if_nameindex())]",
    )
    assert all(r.startswith("blocked: ") for r in out.result)  # type: ignore[union-attr]


async def test_signals_to_itself_still_work(runtime: PythonRuntime) -> None:
    # abort() signals the process itself: it dies of it (a worker-exit, not a hang).
    out = await attack(runtime, "os.abort()")
    assert getattr(out, "kind", None) == "worker-exit"
    assert "python exited (signal" in str(out)
    await still_serves(runtime)


def test_a_sigusr1_really_counts(sigusr1) -> None:
    os.kill(os.getpid(), signal.SIGUSR1)
    assert sigusr1.count == 1
