"""The child's namespaces, its read-only root, its unprivileged uid. Standard library only.

Loaded by ``_child.py`` in the Code Mode template and run in each child before it reports
ready, in this order (as root, the template's case here):

1. (the template made the child pid 1 of a new pid namespace);
2. new mount, network and ipc namespaces; a new root on a tmpfs of ``scratch_mb``
   holding the read-only binds of the read paths, ``/dev/null``, ``/dev/zero``,
   ``/dev/urandom`` (read-only too: a device's mode and times cannot be changed through
   them), a fresh read-only ``/proc``, ``/dev/shm`` and the scratch directory (the working
   directory, at the path the host made); ``pivot_root`` into it; its standard input
   reopened on the bound ``/dev/null`` (the inherited one is the host's);
3. uid and gid 65534 (``nobody``) outside, then a user namespace in which the child is
   65534 too, with every capability dropped: the child owns no host file, so it can change
   the mode, owner or times of nothing outside its scratch directory (which it owns).

Without root (a host that runs toolray unprivileged) the user namespace comes first and
owns the others, and there is no pid namespace (the template cannot make one). Each step
that fails is reported with its reason and the rest goes on (``"auto"``); the host refuses
the child when a required layer is missing (``"strict"``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from typing import Any, Final

NOBODY: Final = 65534
_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWNET = (
    0x20000,
    0x8000000,
    0x10000000,
    0x40000000,
)
_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_BIND, _MS_REC, _MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
_MNT_DETACH, _AT_RECURSIVE = 2, 0x8000
_ATTR_RDONLY, _ATTR_NOSUID, _ATTR_NODEV = 1, 2, 4
_MS_RDONLY = 1
_SYS_PIVOT_ROOT, _SYS_CAPSET, _SYS_MOUNT_SETATTR = 155, 126, 442
_DEVICES: Final = ("null", "zero", "urandom")
_NAMESPACES: Final = (
    ("mount_namespace", _CLONE_NEWNS),
    ("network_namespace", _CLONE_NEWNET),
    ("ipc_namespace", _CLONE_NEWIPC),
)


class SandboxError(OSError):
    """One step of building the sandbox failed (its text says which)."""


def call(result: int, what: str) -> int:
    """``result`` of a libc call, or :class:`SandboxError` naming ``what`` and errno."""
    if result < 0:
        err = ctypes.get_errno()
        raise SandboxError(err, f"{what}: [Errno {err}] {os.strerror(err)}")
    return result


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    encoded = [None if s is None else s.encode() for s in (source, target, fstype)]
    result = _libc.mount(*encoded, ctypes.c_ulong(flags), data.encode() or None)
    call(result, f"mount {target}")


class _MountAttr(ctypes.Structure):
    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _read_only(path: str, *, devices: bool = False) -> None:
    attr = _MountAttr(_ATTR_RDONLY | _ATTR_NOSUID | (0 if devices else _ATTR_NODEV), 0, 0, 0)
    flags = _AT_RECURSIVE
    result = _libc.syscall(_SYS_MOUNT_SETATTR, -100, path.encode(), flags, ctypes.byref(attr), 32)
    call(result, f"read-only {path}")


def _bind(path: str, root: str, *, writable: bool = False, device: bool = False) -> None:
    target = root + path
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "ab"):
            pass
    _mount(path, target, None, _MS_BIND | _MS_REC)
    if not writable:
        _read_only(target, devices=device)


def build_root(root: str, config: dict[str, Any], *, fresh_proc: bool, owner: int) -> None:
    """Mount the child's new root on ``root`` (the scratch dir's path) and pivot into it."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    size = f"size={config['scratch_bytes']},nr_inodes={config['scratch_inodes']},mode=755"
    _mount("tmpfs", root, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, size)
    for path in config["read_paths"]:
        _bind(path, root)
    for hidden in config["hidden_paths"]:  # e.g. the standard library's site-packages
        _mount("tmpfs", root + hidden, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, "size=4k")
        _read_only(root + hidden)
    for name in _DEVICES:  # usable, but their mode and times are the host's to keep
        _bind(f"/dev/{name}", root, device=True)
    for path in config.get("write_paths", ()):
        _bind(path, root, writable=True)
    for directory, mode in (("/dev/shm", 0o1777), ("/proc", 0o555), (root, 0o700)):
        os.makedirs(root + directory, exist_ok=True)
        os.chmod(root + directory, mode)
    os.chown(root + root, owner, owner)
    if fresh_proc:  # read-only: a mode changed there would change for every /proc
        _mount("proc", root + "/proc", "proc", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    os.mkdir(root + "/.old")
    call(_libc.syscall(_SYS_PIVOT_ROOT, root.encode(), (root + "/.old").encode()), "pivot_root")
    os.chdir("/")
    call(_libc.umount2(b"/.old", _MNT_DETACH), "umount the old root")
    os.rmdir("/.old")
    null = os.open("/dev/null", os.O_RDWR)  # its own, read-only bind: not the host's
    os.dup2(null, 0)
    os.close(null)


def _write(dir_fd: int, name: str, text: str) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_user_namespace(proc_fd: int, inside: int, outside: int, flags: int = 0) -> None:
    """A new user namespace (with ``flags``' namespaces) mapping ``inside`` onto ``outside``."""
    call(_libc.unshare(_CLONE_NEWUSER | flags), "unshare(CLONE_NEWUSER)")
    _write(proc_fd, "setgroups", "deny")
    _write(proc_fd, "gid_map", f"{inside} {outside} 1\n")
    _write(proc_fd, "uid_map", f"{inside} {outside} 1\n")


class _CapHeader(ctypes.Structure):
    _fields_ = (("version", ctypes.c_uint32), ("pid", ctypes.c_int))


class _CapData(ctypes.Structure):
    _fields_ = (
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    )


def drop_capabilities() -> None:
    """No capability left in any set (in whatever user namespace the process is)."""
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    call(_libc.syscall(_SYS_CAPSET, ctypes.byref(header), ctypes.byref(data)), "capset")


def become_nobody(scratch: str) -> None:
    """Root only: the scratch dir to uid 65534, then uid/gid 65534 and no groups."""
    os.chown(scratch, NOBODY, NOBODY)
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    _libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE: own /proc/<pid> again, to write its maps
    _libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG SIGKILL again: a new uid cleared it


class Layers:
    """What one child achieved: ``{layer: None (active) | reason}``."""

    def __init__(self, wanted: list[str]) -> None:
        self.wanted = set(wanted)
        self.state: dict[str, str | None] = {}

    def attempt(self, layer: str, step: Any, *args: Any, **kwargs: Any) -> bool:
        """Run ``step`` for ``layer`` when wanted; record success or the reason."""
        if layer not in self.wanted:
            return False
        try:
            step(*args, **kwargs)
        except (OSError, ValueError) as err:
            self.state[layer] = str(err)[:300]
            return False
        self.state.setdefault(layer, None)
        return self.state[layer] is None

    def fail(self, layer: str, reason: str) -> None:
        """Record that ``layer`` could not be had."""
        if layer in self.wanted:
            self.state[layer] = reason

    def active(self, layer: str) -> bool:
        """Whether ``layer`` was wanted and is in place."""
        return layer in self.state and self.state[layer] is None


def _unshare_each(layers: Layers) -> list[str]:
    made = []
    for layer, flag in _NAMESPACES:
        if layers.attempt(layer, lambda f=flag, n=layer: call(_libc.unshare(f), f"unshare({n})")):
            made.append(layer)
    return made


def build(config: dict[str, Any], scratch: str, pidns_error: str | None) -> Layers:
    """Enter every wanted layer this process can have; chdir into the scratch dir."""
    layers = Layers(config["layers"])
    if "pid_namespace" in layers.wanted:
        if os.getpid() == 1:
            layers.state["pid_namespace"] = None
        else:
            layers.fail("pid_namespace", pidns_error or "the template made no pid namespace")
    proc_fd = os.open("/proc/self", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        if os.geteuid() == 0:
            _as_root(layers, config, scratch, proc_fd)
        else:
            _unprivileged(layers, config, scratch, proc_fd)
    finally:
        os.close(proc_fd)
    os.chdir(scratch)
    return layers


def _as_root(layers: Layers, config: dict[str, Any], scratch: str, proc_fd: int) -> None:
    # The namespaces and the new root are made as root; then the child becomes uid 65534
    # outside too, before its user namespace (65534 inside): it owns no host file.
    _unshare_each(layers)
    if layers.active("mount_namespace"):
        fresh_proc = layers.active("pid_namespace")
        layers.attempt(
            "mount_namespace", build_root, scratch, config, fresh_proc=fresh_proc, owner=NOBODY
        )
    become_nobody(scratch)
    layers.attempt("user_namespace", enter_user_namespace, proc_fd, NOBODY, NOBODY)
    with contextlib.suppress(OSError):
        drop_capabilities()


def _unprivileged(layers: Layers, config: dict[str, Any], scratch: str, proc_fd: int) -> None:
    uid = os.geteuid()
    flags = 0
    for layer, flag in _NAMESPACES:
        flags |= flag if layer in layers.wanted else 0
    if not layers.attempt("user_namespace", enter_user_namespace, proc_fd, uid, uid, flags):
        for layer, _ in _NAMESPACES:
            layers.fail(layer, "without root it needs the user namespace, which is missing")
        return
    for layer, _ in _NAMESPACES:
        if layer in layers.wanted:
            layers.state[layer] = None
    if layers.active("mount_namespace"):
        layers.attempt("mount_namespace", build_root, scratch, config, fresh_proc=False, owner=uid)
    drop_capabilities()
