"""``isolation="sandbox"``: each call in a fresh process under Code Mode's confinement.

A sandbox is a call process (the records and the body runner of ``"call"``) forked from a
template of its own and confined — by the very layers of ``toolray.code`` (one substrate),
entered in the same order — before it reports ``ready`` and takes its one call:

1. pid 1 of a new pid namespace (the template makes it), new mount, network (unless the
   placement grants the network) and ipc namespaces, a new read-only root holding only
   what Python and the tools' code need (the interpreter's library, ``sys.path``, the
   system's shared libraries), the placement's ``read_paths`` (read-only) and
   ``write_paths`` (read-write), ``/dev/null``, ``/dev/zero``, ``/dev/urandom``, a
   read-only ``/proc`` of its own and its scratch directory (its working directory);
2. uid 65534 outside and inside a user namespace of its own, no capability;
3. ``no_new_privs``, a Landlock domain (reads beneath the read paths, writes beneath the
   scratch directory, ``/dev/shm`` and the write paths, no TCP unless granted, no signal or
   abstract unix socket outside it), non-dumpable, and the syscall filter of Code Mode
   widened for a tool body: processes of its own (inside its pid namespace) and, with the
   network, sockets.

Its environment is minimal (``PATH``, ``HOME``, ``TMPDIR``, ``LANG``) and its template was
started with nothing of the worker's: no Ray variable, token or session path reaches it. It
is never reused: the worker kills it once its call ended, and with it everything in its pid
namespace. :func:`sandbox_confinement` reports the layers a sandbox gets on this host.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import resource
import shutil
import socket
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any, Final

from toolray.code import Confinement
from toolray.code import _child_landlock as landlock
from toolray.code import _child_sandbox as layers
from toolray.code import _child_seccomp as seccomp
from toolray.code._confinement import refused_layers
from toolray.procs import ChildContext, FrameDecoder, Template, TemplateSpec

__all__ = (
    "SANDBOX_LAYERS",
    "sandbox_config",
    "sandbox_confinement",
    "sandbox_template",
    "serve_sandbox",
)

SANDBOX_LAYERS: Final = (
    "user_namespace",
    "pid_namespace",
    "network_namespace",
    "mount_namespace",
    "ipc_namespace",
    "landlock",
    "seccomp",
)
_SYSTEM_LIBRARIES: Final = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
_ENV: Final = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
_SCRATCH_MB: Final = 64
_SCRATCH_INODES: Final = 16384
_MAX_TASKS: Final = 512
"""``RLIMIT_NPROC`` inside its user namespace: the body's processes and threads."""
_TITLE_ROOM: Final = 512
_PR_SET_NO_NEW_PRIVS, _PR_SET_DUMPABLE = 38, 4


def _python_paths() -> list[str]:
    """What Python and the tools' code read: the interpreter's library, ``sys.path``.

    A ``sys.path`` entry that holds a secret place (Ray's sessions, ``~/.ray``, the home
    directory itself, the temporary directory) is left out.
    """
    found = {os.path.realpath(p) for p in sys.path if p and os.path.exists(p)}
    names = ("stdlib", "platstdlib", "purelib", "platlib")
    found |= {os.path.realpath(sysconfig.get_paths()[n]) for n in names}
    found |= {os.path.realpath(p) for p in _SYSTEM_LIBRARIES if os.path.isdir(p)}
    return sorted(p for p in found if os.path.exists(p) and not _holds_a_secret(p))


def _secret_places() -> list[str]:
    home = os.path.expanduser("~")
    places = ["/tmp/ray", os.path.join(home, ".ray"), home, tempfile.gettempdir()]
    return [os.path.realpath(p) for p in places]


def _holds_a_secret(path: str) -> bool:
    """Whether ``path`` is one of the secret places or holds one."""
    return any(
        place == path or place.startswith(path.rstrip("/") + "/") for place in _secret_places()
    )


def sandbox_config(
    *,
    read_paths: Iterable[str] = (),
    write_paths: Iterable[str] = (),
    network: bool = False,
    refused: Iterable[str] | None = None,
) -> dict[str, Any]:
    """What a sandbox is told (JSON): its layers, its paths, its scratch size.

    ``refused``: layers not to attempt (default: Code Mode's test switch,
    ``TOOLRAY_CODE_REFUSE_LAYERS``, as in this process's environment).
    """
    skip = refused_layers() if refused is None else dict.fromkeys(refused, "refused")
    wanted = [layer for layer in SANDBOX_LAYERS if layer not in skip]
    if network:
        wanted.remove("network_namespace")
    return {
        "layers": wanted,
        "refused": {layer: skip[layer] for layer in SANDBOX_LAYERS if layer in skip},
        "read_paths": sorted({*_python_paths(), *map(_absolute, read_paths)}),
        "write_paths": sorted(map(_absolute, write_paths)),
        "hidden_paths": [],
        "network": network,
        "scratch_bytes": _SCRATCH_MB * 2**20,
        "scratch_inodes": _SCRATCH_INODES,
    }


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"a sandbox path must be absolute: {path!r}")
    real = os.path.realpath(path)
    scratch = os.path.realpath(tempfile.gettempdir())
    if real == scratch or scratch.startswith(real.rstrip("/") + "/"):
        raise ValueError(
            f"a sandbox path must not hold {scratch} (its scratch lives there): {path!r}"
        )
    return real


def sandbox_template() -> Template:
    """The template sandboxes are forked from: toolray's core, none of the host's environment.

    No Ray variable, token or session path reaches it; tools' code is loaded as it comes.
    """
    spec = TemplateSpec(
        entry="toolray.isolation._sandbox:serve_sandbox",
        loader="toolray.isolation._child:preload",
        preload=("toolray.isolation._child",),
        env=_ENV | {"HOME": "/", "TMPDIR": "/tmp"},
        cwd="/",
        sys_path=tuple(p for p in sys.path if p),
        title_room=_TITLE_ROOM,
        keeper=True,  # Ray's kill of a dying worker's children must not reach it
    )
    return Template(spec)


def confine(config: Mapping[str, Any], scratch: str, pidns_error: str | None) -> dict[str, Any]:
    """Enter every layer of ``config`` this process can have; the report (Code Mode's form)."""
    state = layers.build(dict(config), scratch, pidns_error)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    write = [scratch, *config["write_paths"]]
    if state.active("mount_namespace"):
        write.append("/dev/shm")
    network, read = bool(config["network"]), list(config["read_paths"])
    if state.active("pid_namespace") and state.active("mount_namespace"):
        read.append("/proc")  # its own, read-only: its own processes only
    devices = landlock.DEVICE_ACCESS
    state.attempt("landlock", landlock.restrict, read, write, devices, tcp=network, execute=True)
    abi = landlock.abi() if state.active("landlock") else 0  # asked before the filter is on
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NPROC, (_MAX_TASKS, _MAX_TASKS))
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    state.wanted.add("seccomp")
    state.attempt("seccomp", seccomp.install, processes=True, network=network)
    report: dict[str, Any] = {name: state.active(name) for name in SANDBOX_LAYERS[:5]}
    report |= {"landlock_abi": abi}
    report |= {"seccomp": state.active("seccomp")}
    report["missing"] = {name: why for name, why in state.state.items() if why is not None}
    report["missing"] |= dict(config.get("refused") or {})  # not even attempted
    return report


def serve_sandbox(ctx: ChildContext) -> int:
    """A sandbox's entry: its limits, its layers, ``ready`` with the report, then its call."""
    from ._child import serve_confined
    from ._messages import Ready

    scratch = str(ctx.args["workdir"])
    env = _ENV | {"HOME": scratch, "TMPDIR": scratch}
    ctx.set_title([sys.executable, "toolray-sandbox"], env)
    os.dup2(2, 1)  # the template's stdout is discarded; the worker's stderr is its log
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)
    allowance = int(ctx.args["memory_mb"]) * 2**20
    limit = _data_size() + allowance  # read while /proc is still the host's
    report = confine(ctx.args["sandbox"], scratch, ctx.pid_namespace_error)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    sock = socket.socket(fileno=ctx.channel)
    return serve_confined(sock, allowance, Ready(confinement=report))


def _data_size() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def sandbox_confinement(config: Mapping[str, Any], mode: str = "auto") -> Confinement:
    """The layers a sandbox gets on this host: one is started, asked, and ended.

    ``mode`` is reported as given (``"strict"`` refuses calls where a layer is missing).
    """
    template = sandbox_template()
    scratch = tempfile.mkdtemp(prefix="toolray-sandbox-")
    try:
        args = {"workdir": scratch, "memory_mb": 256, "sandbox": dict(config)}
        child = template.fork(args, pid_namespace=True, timeout=60)
        try:
            report = _ready(child.channel)
        finally:
            child.kill()
            child.close()
    except Exception as err:  # no sandbox at all: every layer is missing, with the reason
        reason = f"no sandbox could be started: {str(err)[:200]}"
        report = {"missing": dict.fromkeys(config["layers"], reason)}
    finally:
        template.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return confinement_of(mode, report, config)


def _ready(channel: socket.socket) -> dict[str, Any]:
    decoder = FrameDecoder()
    channel.settimeout(60)
    while True:
        data = channel.recv(65536)
        if not data:
            raise RuntimeError("the sandbox ended before it was ready")
        frames = decoder.feed(data)
        if frames:
            return dict(frames[0].get("confinement") or {})


def confinement_of(mode: str, report: Mapping[str, Any], config: Mapping[str, Any]) -> Confinement:
    """The ``Confinement`` of a sandbox's ready report."""
    missing = {str(k)[:80]: str(v)[:300] for k, v in dict(report.get("missing") or {}).items()}
    return Confinement(
        mode=mode,  # type: ignore[arg-type]
        user_namespace=report.get("user_namespace") is True,
        pid_namespace=report.get("pid_namespace") is True,
        network_namespace=report.get("network_namespace") is True,
        mount_namespace=report.get("mount_namespace") is True,
        ipc_namespace=report.get("ipc_namespace") is True,
        landlock_abi=int(report.get("landlock_abi") or 0),
        seccomp=report.get("seccomp") is True,
        cgroup=False,
        missing=tuple(f"{k}: {v}" for k, v in missing.items()),
    )


def missing_layers(report: Mapping[str, Any]) -> list[str]:
    """``"<layer>: <reason>"`` for each layer a sandbox's report says is missing."""
    missing = dict(report.get("missing") or {})
    return [f"{str(k)[:80]}: {str(v)[:200]}" for k, v in missing.items()]
