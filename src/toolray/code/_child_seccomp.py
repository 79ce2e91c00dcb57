"""The child's syscall filter: an allow-list, x86_64 entries only. Standard library only.

The classic-BPF program checks the architecture first: a syscall through any entry other
than native x86_64 (the i386 ``int 0x80`` entry, or an x32 number) kills the process.
Then only the syscalls a confined Python program needs are allowed; everything else fails
with ``EPERM`` (a ``PermissionError`` in the program). Among what is *not* on the list:
new processes and exec, sockets (but a unix ``socketpair``), signals to anything but the
process itself, ``ptrace``, ``process_vm_*``, ``pidfd_*``, ``io_uring_*``, ``bpf``,
``perf_event_open``, ``userfaultfd``, ``keyctl``, ``open_by_handle_at``,
``personality``, ``memfd_create``, ``mount`` and namespaces, ``setuid`` and friends.
``clone`` is allowed for threads only, ``sendto`` without an address (``send``: a socket
file in a read path cannot be sent to), ``fcntl`` without ``F_SETOWN*``/``F_SETSIG``/
leases/``F_NOTIFY``, ``ioctl`` for a handful of terminal and descriptor requests,
``prctl`` for names and read-only queries. ``clone3`` answers ``ENOSYS`` so the C library
falls back to the filtered ``clone``.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

_ARCH_X86_64 = 0xC000003E
_X32_BIT = 0x40000000
_KILL_PROCESS, _ALLOW = 0x80000000, 0x7FFF0000
_ERRNO = 0x00050000
_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH = 0, 4

ALLOWED: dict[str, int] = {
    # the hot ones first: the filter is a linear scan
    "read": 0, "write": 1, "futex": 202, "epoll_wait": 232, "epoll_pwait": 281,
    "epoll_ctl": 233, "mmap": 9, "munmap": 11, "brk": 12, "mprotect": 10, "close": 3,
    "fstat": 5, "newfstatat": 262, "openat": 257, "lseek": 8, "getpid": 39,
    "clock_gettime": 228, "recvfrom": 45, "getrandom": 318,
    "rt_sigaction": 13, "rt_sigprocmask": 14, "rt_sigreturn": 15, "madvise": 28,
    "readv": 19, "writev": 20, "pread64": 17, "pwrite64": 18, "preadv": 295,
    "pwritev": 296, "preadv2": 327, "pwritev2": 328, "close_range": 436, "open": 2,
    "stat": 4, "lstat": 6, "statx": 332, "access": 21, "faccessat": 269, "faccessat2": 439,
    "readlink": 89, "readlinkat": 267, "getdents64": 217, "getcwd": 79, "chdir": 80,
    "fchdir": 81, "mkdir": 83, "mkdirat": 258, "rmdir": 84, "unlink": 87, "unlinkat": 263,
    "rename": 82, "renameat": 264, "renameat2": 316, "ftruncate": 77, "truncate": 76,
    "fallocate": 285, "fsync": 74, "fdatasync": 75, "chmod": 90, "fchmod": 91,
    "fchmodat": 268, "utimensat": 280, "umask": 95, "flock": 73, "statfs": 137,
    "fstatfs": 138, "fadvise64": 221, "dup": 32, "dup2": 33, "dup3": 292, "mremap": 25,
    "msync": 26, "mincore": 27, "rt_sigpending": 127, "rt_sigsuspend": 130,
    "rt_sigtimedwait": 128, "sigaltstack": 131, "restart_syscall": 219, "pause": 34,
    "nanosleep": 35, "clock_nanosleep": 230, "clock_getres": 229, "gettimeofday": 96,
    "time": 201, "set_robust_list": 273, "rseq": 334, "set_tid_address": 218,
    "sched_yield": 24, "sched_getaffinity": 204, "getcpu": 309, "gettid": 186,
    "getppid": 110, "getuid": 102, "geteuid": 107, "getgid": 104, "getegid": 108,
    "getgroups": 115, "getresuid": 118, "getresgid": 120, "getpgrp": 111, "getpgid": 121,
    "getsid": 124, "getrusage": 98, "times": 100, "getrlimit": 97, "sysinfo": 99,
    "uname": 63, "epoll_create1": 291, "epoll_pwait2": 441, "poll": 7, "ppoll": 271,
    "select": 23, "pselect6": 270, "shutdown": 48, "getsockname": 51, "getpeername": 52,
    "getsockopt": 55, "exit": 60, "exit_group": 231,
}  # fmt: skip
"""Syscalls allowed whatever their arguments (x86_64 numbers)."""

_CLONE, _CLONE3, _FCNTL, _IOCTL, _PRCTL, _TGKILL, _SOCKETPAIR, _PRLIMIT, _SENDTO = (
    56, 435, 72, 16, 157, 234, 53, 302, 44,
)  # fmt: skip
_CLONE_THREAD = 0x10000
_CLONE_NAMESPACES = 0x7E020080  # NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET NEWTIME
FCNTL_ALLOWED = (0, 1, 2, 3, 4, 5, 6, 7, 36, 37, 38, 1030, 1032, 1034)
"""``F_DUPFD`` … ``F_SETLKW``, the OFD locks, ``F_DUPFD_CLOEXEC``, ``F_GETPIPE_SZ``,
``F_GET_SEALS``: not ``F_SETOWN`` (8), ``F_SETSIG`` (10), ``F_SETOWN_EX`` (15), leases or
``F_NOTIFY``, which could deliver signals to other processes."""
IOCTL_ALLOWED = (0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451)
"""``TCGETS``, ``TIOCGWINSZ``, ``FIONREAD``, ``FIONBIO``, ``FIONCLEX``, ``FIOCLEX``."""
PRCTL_ALLOWED = (3, 15, 16, 21, 23, 39)
"""``PR_GET_DUMPABLE``, ``PR_SET_NAME``, ``PR_GET_NAME``, ``PR_GET_SECCOMP``,
``PR_CAPBSET_READ``, ``PR_GET_NO_NEW_PRIVS``."""
PROCESSES: dict[str, int] = {
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "wait4": 61, "waitid": 247,
    "kill": 62, "tkill": 200, "setpgid": 109, "setsid": 112, "pipe": 22, "pipe2": 293,
}  # fmt: skip
"""With ``processes`` (a sandboxed tool body): new processes, inside its pid namespace."""
NETWORK: dict[str, int] = {
    "socket": 41, "connect": 42, "accept": 43, "sendto": 44, "sendmsg": 46, "recvmsg": 47,
    "bind": 49, "listen": 50, "setsockopt": 54, "recvmmsg": 299, "accept4": 288,
    "sendmmsg": 307, "socketpair": 53,
}  # fmt: skip
"""With ``network`` (a sandboxed tool body granted the network): sockets of any kind."""


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits of seccomp_data.args[index] (little-endian)


def _one_of(nr: int, arg: int, values: tuple[int, ...]) -> list[bytes]:
    """``nr`` allowed when argument ``arg`` is one of ``values`` (else EPERM)."""
    body = [_op(_LD_W_ABS, _arg(arg))]
    for value in values:
        body += [_op(_JEQ, value, 0, 1), _op(_RET, _ALLOW)]
    body.append(_op(_RET, _ERRNO | errno.EPERM))
    return [_op(_JEQ, nr, 0, len(body)), *body]


def _sendto_without_address() -> list[bytes]:
    """``sendto`` allowed only with no destination (``dest_addr``, argument 4, is NULL)."""
    body = [
        _op(_LD_W_ABS, _arg(4)),
        _op(_JEQ, 0, 0, 3),
        _op(_LD_W_ABS, _arg(4) + 4),  # its high 32 bits
        _op(_JEQ, 0, 0, 1),
        _op(_RET, _ALLOW),
        _op(_RET, _ERRNO | errno.EPERM),
    ]
    return [_op(_JEQ, _SENDTO, 0, len(body)), *body]


def _clone(processes: bool) -> list[bytes]:
    body = [
        _op(_LD_W_ABS, _arg(0)),
        _op(_JSET, _CLONE_THREAD, 0, 0 if processes else 2),  # a thread (or a process)
        _op(_JSET, _CLONE_NAMESPACES, 1, 0),  # no namespace flag
        _op(_RET, _ALLOW),
        _op(_RET, _ERRNO | errno.EPERM),
    ]
    return [_op(_JEQ, _CLONE, 0, len(body)), *body]


def program(own_pid: int, *, processes: bool = False, network: bool = False) -> list[bytes]:
    """The filter's instructions for a process whose pid (in its namespace) is ``own_pid``.

    ``processes``: it may start processes and signal them (a sandboxed tool body, alone in
    its pid namespace); ``network``: it may use sockets of any kind.
    """
    prog = [
        _op(_LD_W_ABS, _ARCH),
        _op(_JEQ, _ARCH_X86_64, 1, 0),
        _op(_RET, _KILL_PROCESS),  # i386 (int 0x80) or any other entry
        _op(_LD_W_ABS, _NR),
        _op(_JGE, _X32_BIT, 0, 1),
        _op(_RET, _KILL_PROCESS),  # x32 numbers
    ]
    extra = {**(PROCESSES if processes else {}), **(NETWORK if network else {})}
    for nr in (*ALLOWED.values(), *extra.values()):
        prog += [_op(_JEQ, nr, 0, 1), _op(_RET, _ALLOW)]
    prog += [_op(_JEQ, _CLONE3, 0, 1), _op(_RET, _ERRNO | errno.ENOSYS)]
    prog += _sendto_without_address()
    prog += _clone(processes)
    prog += _one_of(_FCNTL, 1, FCNTL_ALLOWED)
    prog += _one_of(_IOCTL, 1, IOCTL_ALLOWED)
    prog += _one_of(_PRCTL, 0, PRCTL_ALLOWED)
    if processes:  # its pid namespace holds only its own processes
        prog += [_op(_JEQ, _TGKILL, 0, 1), _op(_RET, _ALLOW)]
    prog += _one_of(_TGKILL, 0, (own_pid,))  # signals to itself (abort(), raise())
    prog += _one_of(_SOCKETPAIR, 0, (1,))  # AF_UNIX: an event loop's self-pipe
    prog += _one_of(_PRLIMIT, 0, (0,))  # its own limits only
    prog.append(_op(_RET, _ERRNO | errno.EPERM))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def install(*, processes: bool = False, network: bool = False) -> None:
    """Install the filter on this process (after ``PR_SET_NO_NEW_PRIVS``); see :func:`program`.

    Raises:
        OSError: not Linux on x86_64, or the kernel refused the filter.
    """
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        raise OSError(0, f"seccomp: the filter is for Linux x86_64, not {platform.machine()}")
    prog = program(os.getpid(), processes=processes, network=network)
    buffer = ctypes.create_string_buffer(b"".join(prog))
    fprog = _SockFprog(len(prog), ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: [Errno {err}] {os.strerror(err)}")
