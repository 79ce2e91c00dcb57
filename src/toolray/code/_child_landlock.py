"""The child's Landlock domain: read the read paths, write the scratch, no TCP, no signals out.

Standard library only, loaded beside ``_child.py``. The ruleset handles every access right
the kernel's ABI knows (files; TCP bind and connect from ABI 4; signal and abstract unix
socket scoping from ABI 6), so whatever no rule grants is denied: the program reads only
the read paths, writes only its scratch directory and ``/dev/shm``, opens no TCP
connection, signals no process outside its own domain and reaches no abstract socket made
outside it. A sandboxed process also cannot ptrace (nor open ``/proc/<pid>/mem`` of)
anything outside its domain.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

_libc = ctypes.CDLL(None, use_errno=True)
_CREATE, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_VERSION = 1
_RULE_PATH_BENEATH = 1
_EXECUTE, _WRITE, _READ, _READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_REMOVE_DIR, _REMOVE_FILE, _MAKE_DIR, _MAKE_REG, _MAKE_SYM = 1 << 4, 1 << 5, 1 << 7, 1 << 8, 1 << 12
_REFER, _TRUNCATE = 1 << 13, 1 << 14
_SCRATCH = _WRITE | _READ | _READ_DIR | _REMOVE_DIR | _REMOVE_FILE | _MAKE_DIR | _MAKE_REG
_SCRATCH |= _MAKE_SYM | _REFER | _TRUNCATE
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = (("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64))


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def abi() -> int:
    """The kernel's Landlock ABI version (0: not available)."""
    version = _libc.syscall(_CREATE, None, 0, _VERSION)
    return max(0, int(version))


def _handled_fs(version: int) -> int:
    handled = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if version >= 2:
        handled |= _REFER
    if version >= 3:
        handled |= _TRUNCATE
    if version >= 5:
        handled |= 1 << 15  # IOCTL_DEV
    return handled


def _error(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"landlock {what}: [Errno {err}] {os.strerror(err)}")


def _add(ruleset: int, path: str, access: int, handled: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            access &= _READ | _WRITE | _TRUNCATE | _EXECUTE | (1 << 15)
        rule = _PathBeneath(access & handled, fd)
        if _libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise _error(f"rule for {path}")
    finally:
        os.close(fd)


def restrict(
    read: Iterable[str],
    write: Iterable[str],
    devices: dict[str, int],
    *,
    tcp: bool = False,
    execute: bool = False,
) -> int:
    """Enter a Landlock domain (``PR_SET_NO_NEW_PRIVS`` must be set); return its ABI.

    ``read`` paths get reading (and executing, with ``execute``), ``write`` paths
    everything but executing and special files, ``devices`` (path → access bits) exactly
    theirs. ``tcp``: TCP is not restricted (else no port may be bound or connected to).

    Raises:
        OSError: Landlock is unavailable or a rule could not be added.
    """
    version = abi()
    if version < 1:
        raise OSError(0, "landlock: not available in this kernel (ABI 0)")
    handled = _handled_fs(version)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if version >= 4 and not tcp:
        attr.net, size = 0b11, 16  # TCP bind and connect, with no port allowed
    if version >= 6:
        attr.scoped, size = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL, 24
    reading = _READ | _READ_DIR | (_EXECUTE if execute else 0)
    ruleset = _libc.syscall(_CREATE, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise _error("create_ruleset")
    try:
        for path in read:
            _add(ruleset, path, reading, handled)
        for path in write:
            _add(ruleset, path, _SCRATCH, handled)
        for path, access in devices.items():
            _add(ruleset, path, access, handled)
        if _libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise _error("restrict_self")
    finally:
        os.close(ruleset)
    return version


DEVICE_ACCESS = {"/dev/null": _READ | _WRITE | _TRUNCATE, "/dev/zero": _READ, "/dev/urandom": _READ}
"""What a program may do with the devices it sees."""
