"""``Confinement``: which layers a runtime's children get, asked for and reported."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = (
    "LAYERS",
    "MODES",
    "REFUSE_VARIABLE",
    "Confinement",
    "ConfinementMode",
    "from_report",
    "missing_for_strict",
    "wanted_layers",
)

ConfinementMode = Literal["auto", "strict", "off"]
MODES: Final = ("auto", "strict", "off")
LAYERS: Final = (
    "user_namespace",
    "pid_namespace",
    "network_namespace",
    "mount_namespace",
    "ipc_namespace",
    "landlock",
    "seccomp",
)
"""The layers a child enters (``cgroup`` is the host's, see :mod:`._cgroup`)."""
REFUSE_VARIABLE: Final = "TOOLRAY_CODE_REFUSE_LAYERS"
"""A test and diagnosis switch: layers named here (comma-separated) are not attempted, as if
this host could not give them (``strict`` then refuses to start)."""
_WORDS: Final = {
    "user_namespace": "user",
    "pid_namespace": "pid",
    "network_namespace": "net",
    "mount_namespace": "mount",
    "ipc_namespace": "ipc",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Confinement:
    """What confines a runtime's programs (``PythonRuntime.confinement()``).

    Example:
        >>> c = Confinement(mode="off", user_namespace=False, pid_namespace=False,
        ...     network_namespace=False, mount_namespace=False, ipc_namespace=False,
        ...     landlock_abi=0, seccomp=True, cgroup=False, missing=())
        >>> c.describe()
        'confinement off: no namespaces, no Landlock, seccomp, no cgroup'
    """

    mode: ConfinementMode
    user_namespace: bool
    pid_namespace: bool
    network_namespace: bool
    mount_namespace: bool
    ipc_namespace: bool
    landlock_abi: int
    """The Landlock ABI in force (0: not used)."""
    seccomp: bool
    cgroup: bool
    """Memory and pid limits enforced by a cgroup of the child's own."""
    missing: tuple[str, ...]
    """The layers asked for and not active, each ``"<layer>: <reason>"``."""

    def describe(self) -> str:
        """The active layers in one line."""
        spaces = [word for name, word in _WORDS.items() if getattr(self, name)]
        parts = [f"{', '.join(spaces)} namespaces" if spaces else "no namespaces"]
        parts.append(f"Landlock ABI {self.landlock_abi}" if self.landlock_abi else "no Landlock")
        parts.append("seccomp" if self.seccomp else "no seccomp")
        parts.append("cgroup" if self.cgroup else "no cgroup")
        return f"confinement {self.mode}: " + ", ".join(parts)


def refused_layers(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The layers the test switch refuses, with the reason each will carry."""
    names = [n.strip() for n in environ.get(REFUSE_VARIABLE, "").split(",") if n.strip()]
    unknown = sorted(set(names) - {*LAYERS, "cgroup"})
    if unknown:
        raise ValueError(f"{REFUSE_VARIABLE} names unknown layers: {', '.join(unknown)}")
    return dict.fromkeys(names, f"refused by {REFUSE_VARIABLE}")


def wanted_layers(mode: ConfinementMode, refused: Mapping[str, str]) -> list[str]:
    """The layers a child attempts: all but the refused ones; none for ``off``.

    (With ``off`` a child still installs the syscall filter.)
    """
    if mode == "off":
        return []
    return [layer for layer in LAYERS if layer not in refused]


def from_report(
    mode: ConfinementMode,
    report: Mapping[str, Any],
    refused: Mapping[str, str],
    cgroup: tuple[bool, str],
) -> Confinement:
    """The runtime's report from one child's ``ready`` report and what the host knows."""
    missing: dict[str, str] = {}
    if mode != "off":
        missing |= {layer: reason for layer, reason in refused.items() if layer in LAYERS}
        missing |= {str(k)[:80]: str(v)[:300] for k, v in dict(report.get("missing") or {}).items()}
        if not cgroup[0]:
            missing["cgroup"] = refused.get("cgroup", cgroup[1])
    flags = {name: report.get(name) is True for name in _WORDS}
    return Confinement(
        mode=mode,
        **flags,
        landlock_abi=int(report.get("landlock_abi") or 0),
        seccomp=report.get("seccomp") is True,
        cgroup=cgroup[0],
        missing=tuple(
            f"{layer}: {missing[layer]}" for layer in (*LAYERS, "cgroup") if layer in missing
        ),
    )


def missing_for_strict(confinement: Confinement, cgroup_delegated: bool) -> tuple[str, ...]:
    """What ``strict`` cannot do without: every missing layer, ``cgroup`` only if delegated."""
    return tuple(
        entry
        for entry in confinement.missing
        if not entry.startswith("cgroup:") or cgroup_delegated
    )
