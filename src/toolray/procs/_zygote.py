"""The template (zygote) process: load once, then fork children on request. Stdlib only.

Started by :class:`toolray.procs.Template` as ``python [-I -S -B] _zygote.py <config>`` (by
path, so it works for an interpreter that never imports toolray) or imported as
``toolray.procs._zygote`` (the records and :class:`ChildContext` live here for both sides).

The template never runs user code itself: it imports the preload list, calls the init hook,
then serves the control socket (``AF_UNIX`` ``SOCK_SEQPACKET``, one JSON object per
message, descriptors as ``SCM_RIGHTS``) until the host says ``stop`` or goes away (EOF):
children are then killed, reaped, and the template exits. It is every child's parent and a
child subreaper, so it reaps everything below it and reports how each child ended; a child's
process group is killed when the child ends (what it started there does not outlive it), and
so is every process the template *adopts* — a descendant whose own parent died, a
double-forked ``setsid`` daemon say — which it reports in an ``orphans`` message.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, Final

CHANNEL_FD: Final = 3
"""Where a child finds its end of the host's bidirectional socket."""
ROOM_VARIABLE: Final = "TOOLRAY_PROCS_ROOM"
"""Padding in the template's environment: room for a child's :meth:`ChildContext.set_title`."""
MAX_CONTROL_BYTES: Final = 1 << 16
_ADOPT_WAIT_S: Final = 30.0
"""How long an adopted process may take to arrive (then it is reported lost)."""
_ADOPT_LOOK_MS: Final = 500
_CLONE_NEWPID: Final = 0x20000000
_PR_SET_PDEATHSIG: Final = 1
_PR_SET_CHILD_SUBREAPER: Final = 36
_HIGH_FD: Final = 100


def load(spec: str) -> Any:
    """``"pkg.module:name"`` or ``"/abs/file.py:name"`` → that object (a module without name)."""
    target, _, name = spec.partition(":") if not spec.startswith("/") else spec.rpartition(":")
    if target.endswith(".py"):
        module_name = os.path.basename(target)[:-3]
        module = sys.modules.get(module_name)
        if module is None or getattr(module, "__file__", None) != target:
            found = importlib.util.spec_from_file_location(module_name, target)
            if found is None or found.loader is None:
                raise ImportError(f"cannot load {target}")
            module = importlib.util.module_from_spec(found)
            sys.modules[module_name] = module
            found.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name) if name else module


class ChildContext:
    """What a child's entry callable receives: its channel, its arguments, a few helpers."""

    def __init__(self, channel: int, args: Any, pidns_error: str | None, stderr: bool) -> None:
        self.channel = channel
        """The child's end of its bidirectional socket to the host (fd :data:`CHANNEL_FD`)."""
        self.args = args
        """The JSON value the host passed with the fork request."""
        self.pid_namespace_error = pidns_error
        """Why a requested pid namespace could not be made (``None``: made or not asked)."""
        self.captured_stderr = stderr
        """Whether fd 2 is a pipe the host reads (else the template's own stderr)."""

    def set_title(self, argv: list[str], env: dict[str, str] | None = None) -> bool:
        """Rewrite what ``/proc/<pid>/cmdline`` (and ``environ``) show, where they fit.

        The process's original argument and environment areas are overwritten in place
        (no privilege needed); ``os.environ`` is replaced too. ``False`` if one did not fit.
        """
        fields = _stat_fields()
        fits: bool = _overwrite(fields[45], fields[46], argv)
        sys.argv = list(argv[-1:])
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
            fits = _overwrite(fields[47], fields[48], [f"{k}={v}" for k, v in env.items()]) and fits
        return fits


def _stat_fields() -> list[int]:
    with open("/proc/self/stat", "rb") as stat:
        text = stat.read()
    return [int(x) if x.lstrip(b"-").isdigit() else 0 for x in text[text.rfind(b")") + 2 :].split()]


def _overwrite(start: int, end: int, items: list[str]) -> bool:
    blob = b"".join(item.encode("utf-8", "surrogateescape") + b"\0" for item in items)
    room = end - start
    if room <= 0 or len(blob) > room:
        return False
    ctypes.memmove(start, blob + b"\0" * (room - len(blob)), room)
    return True


class Zygote:
    """The serve loop: fork on request, reap and report, stop on ``stop`` or EOF."""

    def __init__(
        self,
        control: socket.socket,
        entry: Callable[[ChildContext], Any],
        loader: Callable[[Any, bytes | None], Any] | None = None,
    ) -> None:
        self.control = control
        self.entry = entry
        self.loader = loader
        self.children: dict[int, int] = {}  # pid -> request id
        self.expected: dict[int, float] = {}  # adopted, not yet re-parented here: pid -> until
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.own_pidns = -1
        with contextlib.suppress(OSError):
            self.own_pidns = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def send(self, message: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            self.control.send(json.dumps(message, separators=(",", ":")).encode())

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, _ignore)
        signal.set_wakeup_fd(self.wake_w)
        self.libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.send({"op": "ready", "pid": os.getpid()})
        poller = select.poll()
        poller.register(self.control.fileno(), select.POLLIN)
        poller.register(self.wake_r, select.POLLIN)
        while True:
            ready = poller.poll(_ADOPT_LOOK_MS if self.expected else None)
            if self.expected:
                self.settle_expected(_own_children())
            for fd, _ in ready:
                if fd == self.wake_r:
                    with contextlib.suppress(OSError):
                        os.read(self.wake_r, 4096)
                    self.reap()
                elif not self.on_control():
                    self.stop()
                    return

    def on_control(self) -> bool:
        try:
            data, fds, _, _ = socket.recv_fds(self.control, MAX_CONTROL_BYTES, 4)
        except OSError:
            return False
        if not data:
            return False
        try:
            request = json.loads(data)
            op = request["op"]
        except (ValueError, KeyError, TypeError):
            op = None
        if op == "fork":
            self.fork(request, fds)
        elif op == "kill":
            self.kill(request.get("pid"), request.get("signal", signal.SIGKILL))
        elif op == "adopt":
            self.adopt(request)
        elif op == "load":
            self.load(request.get("args"), fds[0] if request.get("data") and fds else None)
        for fd in fds:
            os.close(fd)
        return bool(op != "stop")

    def fork(self, request: dict[str, Any], fds: list[int]) -> None:
        asked = bool(request.get("pid_namespace"))
        pidns_error = self.enter_pid_namespace() if asked else None
        gc.freeze()  # the collector in a child never writes to (and so copies) these pages
        try:
            pid = os.fork()
        except OSError as err:
            pid, error = -1, str(err)
        if pid == 0:
            self.child(request, fds, pidns_error)
        if asked and pidns_error is None:  # later children start in the template's own again
            self.libc.setns(self.own_pidns, _CLONE_NEWPID)
        if pid < 0:
            self.send({"op": "fork-failed", "id": request.get("id"), "error": error})
            return
        with contextlib.suppress(OSError):
            os.setpgid(pid, pid)  # also done by the child: whichever runs first
        self.children[pid] = request.get("id", 0)
        reply = {"op": "forked", "id": request.get("id"), "pid": pid}
        self.send(reply | {"pid_namespace_error": pidns_error})

    def adopt(self, request: dict[str, Any]) -> None:
        """The host's ``adopt``: a process about to become this one's child is one of them.

        A child's double-forked copy of itself (the host verified who it is) is re-parented
        here once the host lets it go: from now on it is reaped, reported and killed like a
        forked child, never as an orphan. One that never arrives is reported lost.
        """
        pid, ident = request.get("pid"), request.get("id")
        if type(pid) is not int or pid <= 0 or pid in self.children:
            self.send({"op": "fork-failed", "id": ident, "error": f"cannot adopt {pid!r}"})
            return
        self.children[pid] = ident if type(ident) is int else 0
        self.expected[pid] = time.monotonic() + _ADOPT_WAIT_S
        self.send({"op": "forked", "id": ident, "pid": pid})

    def settle_expected(self, own: list[int]) -> None:
        """Adopted processes now here are children; one overdue is reported lost."""
        now = time.monotonic()
        for pid, until in list(self.expected.items()):
            if pid in own or now > until:
                del self.expected[pid]
            if pid not in own and now > until and self.children.pop(pid, None) is not None:
                self.send({"op": "exited", "pid": pid, "code": None, "signal": int(signal.SIGKILL)})

    def load(self, args: Any, fd: int | None) -> None:
        """The host's ``load``: the loader runs here, so later children inherit its work."""
        if self.loader is None:
            return
        try:
            data = None
            if fd is not None:
                chunks = []
                while chunk := os.read(fd, 1 << 20):
                    chunks.append(chunk)
                data = b"".join(chunks)
            self.loader(args, data)
        except Exception:  # a bad load is the loader's failure, never the template's
            with contextlib.suppress(BaseException):
                traceback.print_exc()

    def enter_pid_namespace(self) -> str | None:
        if self.own_pidns < 0:
            return "no /proc/self/ns/pid"
        if self.libc.unshare(_CLONE_NEWPID) != 0:
            err = ctypes.get_errno()
            return f"unshare(CLONE_NEWPID): [Errno {err}] {os.strerror(err)}"
        return None

    def child(self, request: dict[str, Any], fds: list[int], pidns_error: str | None) -> None:
        code = 1
        self.control.detach()  # its descriptor is closed below; the object must not close it
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.setpgid(0, 0)
            self.libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            stderr = bool(request.get("capture_stderr")) and len(fds) > 1
            _arrange_fds(fds[0], fds[1] if stderr else None)
            context = ChildContext(CHANNEL_FD, request.get("args"), pidns_error, stderr)
            result = self.entry(context)
            code = result if type(result) is int else 0
        except SystemExit as exit_:
            code = exit_.code if type(exit_.code) is int else 1
        except BaseException:  # the child must never return into the template's loop
            with contextlib.suppress(BaseException):
                traceback.print_exc()
        finally:
            os._exit(code)

    def kill(self, pid: object, signum: object) -> None:
        if type(pid) is not int or pid not in self.children or type(signum) is not int:
            return
        if pid in self.expected and pid not in _own_children():
            return  # adopted but not here yet: its pid is not this template's to signal
        with contextlib.suppress(OSError):
            os.killpg(pid, signum)
        with contextlib.suppress(OSError):
            os.kill(pid, signum)

    def reap(self) -> None:
        # Look first, reap after: a child's group is killed while the child is still an
        # unreaped zombie, so its pid cannot yet name anyone else's group.
        while True:
            try:
                ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if ended is None:
                return
            pid = ended.si_pid
            if pid in self.children:  # what it started in its group does not outlive it
                with contextlib.suppress(OSError):
                    os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            if self.children.pop(pid, None) is not None:
                self.send(exit_report(pid, status, usage))
            self.kill_orphans()

    def kill_orphans(self) -> None:
        """SIGKILL every process adopted (a child of the template it never forked or adopted)."""
        own = _own_children()
        self.settle_expected(own)
        orphans = [pid for pid in own if pid not in self.children]
        for pid in orphans:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if orphans:  # each is reaped by the loop, once it has died
            self.send({"op": "orphans", "killed": len(orphans)})

    def stop(self) -> None:
        # ``kill`` takes the host's plain ints (``signal.SIGKILL`` is an enum it would refuse)
        for pid in list(self.children):
            self.kill(pid, int(signal.SIGKILL))
        self.kill_orphans()
        while True:
            try:
                pid, status, usage = os.wait4(-1, 0)
            except ChildProcessError:
                break
            if self.children.pop(pid, None) is not None:
                self.send(exit_report(pid, status, usage))
            self.kill_orphans()  # what a dying child leaves comes to the template


def exit_report(pid: int, status: int, usage: Any) -> dict[str, Any]:
    """The ``exited`` message for one reaped child."""
    report: dict[str, Any] = {"op": "exited", "pid": pid, "code": None, "signal": None}
    if os.WIFSIGNALED(status):
        report["signal"] = os.WTERMSIG(status)
    else:
        report["code"] = os.WEXITSTATUS(status)
    report["cpu_s"] = usage.ru_utime + usage.ru_stime
    report["max_rss_kb"] = usage.ru_maxrss
    return report


def _arrange_fds(channel: int, stderr: int | None) -> None:
    """Channel on fd 3, stderr on fd 2 (when captured), stdin on /dev/null; close the rest."""
    high_channel = fcntl.fcntl(channel, fcntl.F_DUPFD, _HIGH_FD)
    high_stderr = None if stderr is None else fcntl.fcntl(stderr, fcntl.F_DUPFD, _HIGH_FD)
    os.dup2(high_channel, CHANNEL_FD)
    if high_stderr is not None:
        os.dup2(high_stderr, 2)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.closerange(CHANNEL_FD + 1, 1 << 20)


def _own_children() -> list[int]:
    """This process's children (every thread's), from ``/proc`` (none where it does not say)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as kids:
                found += [int(pid) for pid in kids.read().split()]
    return found


def _ignore(signum: int, frame: object) -> None:
    """SIGCHLD wakes the loop through the wakeup descriptor; nothing to do here."""


def main(config: dict[str, Any]) -> None:
    """Boot: the control socket, the preload list, the init hook; then serve."""
    control = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=config["control_fd"])
    os.environ.pop(ROOM_VARIABLE, None)
    if config.get("keeper"):  # a shell's background job ignores these: children must not
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    for path in config.get("sys_path", ()):
        sys.path.insert(0, path)
    for name in config.get("preload", ()):
        load(name if ":" in name else name + ":")
    init = config.get("init")
    if init:
        load(init)(config.get("init_args"))
    loader = config.get("loader")
    Zygote(control, load(config["entry"]), load(loader) if loader else None).serve()
    os._exit(0)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
