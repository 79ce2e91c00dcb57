"""The syscall allow-list, native entry: what a program may not ask the kernel for."""

from __future__ import annotations

import errno

import pytest

from tests.code.redteam._kit import attack
from toolray.code import PythonRuntime

DENIED = {
    "fork": (57,),
    "vfork": (58,),
    "clone for a process": (56, 17, 0, 0, 0, 0),  # SIGCHLD, no CLONE_THREAD
    "clone a thread into a new namespace": (56, 0x10000 | 0x100 | 0x800 | 0x10000000, 0, 0, 0),
    "execve": (59, 0, 0, 0),
    "socket": (41, 2, 1, 0),
    "socketpair for inet": (53, 2, 1, 0, 0),
    "ptrace": (101, 16, 1, 0, 0),
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "process_vm_writev": (311, 1, 0, 0, 0, 0, 0),
    "pidfd_open": (434, 1, 0),
    "pidfd_getfd": (438, 3, 3, 0),
    "pidfd_send_signal": (424, 3, 10, 0, 0),
    "io_uring_setup": (425, 8, 0),
    "io_uring_enter": (426, 0, 0, 0, 0, 0, 0),
    "bpf": (321, 0, 0, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "userfaultfd": (323, 0),
    "keyctl": (250, 0, 0, 0, 0, 0),
    "add_key": (248, 0, 0, 0, 0, 0),
    "open_by_handle_at": (304, 3, 0, 0),
    "personality": (135, 0x0008),
    "memfd_create": (319, 0, 0),
    "unshare": (272, 0),
    "setns": (308, 3, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "umount2": (166, 0, 0),
    "pivot_root": (155, 0, 0),
    "chroot": (161, 0),
    "setuid": (105, 0),
    "setgroups": (116, 0, 0),
    "kill": (62, 1, 0),
    "kcmp": (312, 1, 1, 0, 0, 0),
    "seccomp": (317, 0, 0, 0),
    "landlock_create_ruleset": (444, 0, 0, 1),
    "mknod": (133, 0, 0, 0),
    "pipe2": (293, 0, 0),
    "shmget": (29, 0, 4096, 0),
    "fcntl F_SETLEASE": (72, 3, 1024, 1),
    "fcntl F_NOTIFY": (72, 3, 1026, 1),
    "prctl PR_SET_DUMPABLE": (157, 4, 1, 0, 0, 0),
    "prctl PR_SET_PDEATHSIG": (157, 1, 9, 0, 0, 0),
    "ioctl TIOCSTI": (16, 0, 0x5412, 0),
    "prlimit64 on another process": (302, 2, 7, 0, 0),
}


@pytest.mark.parametrize("call", DENIED.values(), ids=DENIED.keys())
async def test_a_forbidden_syscall_fails_with_eperm(runtime: PythonRuntime, call) -> None:
    out = await attack(runtime, f"syscall{tuple(call)!r}")
    assert out.result == -errno.EPERM  # type: ignore[union-attr]


async def test_clone3_answers_enosys_so_threads_fall_back_to_clone(runtime: PythonRuntime) -> None:
    program = (
        "import asyncio\n"
        "r = syscall(435, 0, 0)\n"
        "[r, await asyncio.to_thread(lambda: 6 * 7)]"  # a thread: clone with CLONE_THREAD
    )
    out = await attack(runtime, program)
    assert out.result == [-errno.ENOSYS, 42]  # type: ignore[union-attr]


async def test_what_a_program_needs_still_works(runtime: PythonRuntime) -> None:
    program = (
        "import asyncio, hashlib, time, uuid, random as r, json, datetime\n"
        "loop = asyncio.new_event_loop()\n"  # a unix socketpair and epoll
        "loop.close()\n"
        "await asyncio.sleep(0.001)\n"
        "[len(hashlib.sha256(b'x').hexdigest()), uuid.uuid4().version, r.random() < 1,"
        " time.monotonic() > 0, json.loads('[1]'), datetime.datetime.now().year > 2000,"
        " syscall(157, 3, 0, 0, 0, 0), syscall(157, 39, 0, 0, 0, 0)]"
    )
    out = await attack(runtime, program)
    # ... and the process is not dumpable (PR_GET_DUMPABLE 0) and has no_new_privs set (1)
    assert out.result == [64, 4, True, True, [1], True, 0, 1]  # type: ignore[union-attr]
