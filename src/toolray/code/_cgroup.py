"""A cgroup v2 per child, where the host delegates a directory for them; else a reason.

The runtime never creates, moves or writes a cgroup it was not given: a host that
delegates one names a cgroup v2 directory in ``TOOLRAY_CODE_CGROUP`` (the runtime's
children go below it; ``memory`` and ``pids`` must be enabled in its
``cgroup.subtree_control``). Each child then gets ``<dir>/toolray-code-<pid>`` with
``memory.max`` (its memory and its scratch tmpfs, which the kernel charges to it),
``memory.swap.max = 0`` and ``pids.max``; the directory is removed once the child is reaped.
Elsewhere (cgroup v1 or a hybrid hierarchy, or nothing delegated) ``cgroup`` is reported
missing with the reason, and the child's rlimits and the tmpfs size bound it instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final, final

__all__ = ("DELEGATE_VARIABLE", "ChildCgroup", "delegated")

DELEGATE_VARIABLE: Final = "TOOLRAY_CODE_CGROUP"
_NEEDED: Final = frozenset({"memory", "pids"})
_PIDS_MAX: Final = 16


def _filesystem(path: str, mountinfo: str) -> str:
    """The filesystem type of the mount holding ``path`` (``""`` if unknown)."""
    best, kind = "", ""
    with contextlib.suppress(OSError), open(mountinfo, encoding="utf-8") as lines:
        for line in lines:
            fields = line.split()
            if " - " not in line or len(fields) < 5:
                continue
            point = fields[4]
            inside = path == point or path.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, line.split(" - ", 1)[1].split()[0]
    return kind


def delegated(
    environ: Mapping[str, str] = os.environ, mountinfo: str = "/proc/self/mountinfo"
) -> tuple[str | None, str]:
    """``(directory, "")`` when a usable cgroup v2 directory is delegated, else ``(None, why)``."""
    path = environ.get(DELEGATE_VARIABLE, "")
    if not path:
        if _filesystem("/sys/fs/cgroup", mountinfo) == "cgroup2":
            return None, f"no cgroup v2 directory is delegated ({DELEGATE_VARIABLE} is unset)"
        return None, (
            "this host has a cgroup v1 (hybrid) hierarchy and delegates no cgroup v2 "
            "directory; memory is bounded by RLIMIT_AS and the scratch tmpfs size"
        )
    if _filesystem(path, mountinfo) != "cgroup2":
        return None, f"{DELEGATE_VARIABLE}={path} is not a cgroup v2 directory"
    try:
        enabled = set(Path(path, "cgroup.subtree_control").read_text().split())
    except OSError as err:
        return None, f"{DELEGATE_VARIABLE}={path}: {err}"
    if not enabled >= _NEEDED:
        return None, f"{DELEGATE_VARIABLE}={path} does not enable memory and pids for children"
    if not os.access(path, os.W_OK):
        return None, f"{DELEGATE_VARIABLE}={path} is not writable"
    return path, ""


@final
class ChildCgroup:
    """One child's cgroup below the delegated directory."""

    __slots__ = ("path",)

    def __init__(self, base: str, pid: int, memory_bytes: int | None) -> None:
        """Create it with its limits and move ``pid`` into it.

        Raises:
            OSError: the cgroup filesystem refused (the directory is then removed).
        """
        self.path = Path(base, f"toolray-code-{pid}")
        self.path.mkdir()
        try:
            if memory_bytes is not None:
                (self.path / "memory.max").write_text(str(memory_bytes))
                (self.path / "memory.swap.max").write_text("0")
            (self.path / "pids.max").write_text(str(_PIDS_MAX))
            (self.path / "cgroup.procs").write_text(str(pid))
        except OSError:
            self.remove()
            raise

    def remove(self) -> None:
        """Remove the (empty, once the child is reaped) cgroup; idempotent."""
        with contextlib.suppress(OSError):
            self.path.rmdir()
