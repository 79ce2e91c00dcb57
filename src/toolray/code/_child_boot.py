"""A Code Mode child from template to warm: what the template loads, what each child enters.

Standard library only, loaded beside ``_child.py``. :func:`prepare` runs once in the
template (the allowed modules imported, the paths a program may read worked out);
:func:`confine` runs in each child before it reports ready: the sandbox (namespaces and the
read-only root, ``_child_sandbox.py``), ``PR_SET_NO_NEW_PRIVS``, Landlock
(``_child_landlock.py``), the resource limits (``_child_guard.py``), non-dumpable, and
last the syscall filter (``_child_seccomp.py``). It returns what it achieved, layer by
layer, for the host's ``Confinement`` report.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import sysconfig
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolray.code import _child_guard as guard
    from toolray.code import _child_landlock as landlock
    from toolray.code import _child_sandbox as sandbox
    from toolray.code import _child_seccomp as seccomp
else:  # loaded by path in the template: the siblings are found next to this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _child_guard as guard
    import _child_landlock as landlock
    import _child_sandbox as sandbox
    import _child_seccomp as seccomp

    del sys.path[0]

CONFIG: dict[str, Any] = {}
"""The runtime's settings, given to the template's init hook (:func:`prepare`)."""
_NAMESPACES = (
    "user_namespace",
    "pid_namespace",
    "network_namespace",
    "mount_namespace",
    "ipc_namespace",
)


def _stdlib() -> list[str]:
    paths = sysconfig.get_paths()
    return sorted({os.path.realpath(paths[key]) for key in ("stdlib", "platstdlib")})


def _module_paths(names: list[str], stdlib: list[str]) -> list[str]:
    """The files (or package directories) of the allowed modules outside the stdlib."""
    found = set()
    for name in names:
        path = getattr(sys.modules.get(name), "__file__", None)
        if not path:
            continue
        path = os.path.realpath(path)
        if os.path.basename(path).startswith("__init__."):
            path = os.path.dirname(path)
        if not any(path == root or path.startswith(root + os.sep) for root in stdlib):
            found.add(path)
    return sorted(found)


def prepare(config: dict[str, Any]) -> None:
    """The template's init hook: import the allowed modules, work out the read paths."""
    CONFIG.update(config)
    guard.preload(config["allowed"])
    time.localtime()  # the C library reads the time zone now, while it can
    stdlib = _stdlib()
    read = stdlib + _module_paths(config["allowed"], stdlib) + list(config["read_paths"])
    hidden = [os.path.join(root, "site-packages") for root in stdlib]
    hidden = [h for h in hidden if os.path.isdir(h) and not any(p.startswith(h) for p in read)]
    CONFIG["read_paths"], CONFIG["hidden_paths"] = read, hidden
    gc.collect()
    gc.freeze()  # the children's collections leave the template's objects (and pages) alone


def confine(scratch: str, pidns_error: str | None) -> dict[str, Any]:
    """Enter every layer this child can have; the report the host turns into ``Confinement``."""
    config = CONFIG
    layers = sandbox.Layers(config["layers"])
    if config["mode"] != "off":
        layers = sandbox.build(config, scratch, pidns_error)
    else:
        os.chdir(scratch)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS: nothing regains a privilege
    abi = 0
    if "landlock" in layers.wanted:
        write = [scratch] + (["/dev/shm"] if layers.active("mount_namespace") else [])
        devices = landlock.DEVICE_ACCESS
        read = config["read_paths"]
        layers.attempt("landlock", lambda: landlock.restrict(read, write, devices))
        abi = landlock.abi() if layers.active("landlock") else 0
    guard.confine(
        memory_bytes=config["memory_bytes"],
        cpu_s=config["cpu_s"],
        file_bytes=config["scratch_bytes"],
    )
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no ptrace, no /proc/<pid>/mem, no core
    layers.wanted.add("seccomp")
    layers.attempt("seccomp", seccomp.install)
    report: dict[str, Any] = {name: layers.active(name) for name in _NAMESPACES}
    report |= {"landlock_abi": abi, "seccomp": layers.active("seccomp")}
    report["missing"] = {name: why for name, why in layers.state.items() if why is not None}
    return report
