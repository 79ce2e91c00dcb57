"""Layer storage: what one context (the global layer or one scope) contributed.

A layer holds named tools (unique per layer, registration order), named environments,
anonymous restrictions,
guards in a live "generation" list (R-REG-22), at most one presentation mode, hooks and
executor contributions. Every change bumps the layer's ``version``; views compare versions.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from toolray._definition import ToolDefinition
from toolray.environments._definition import EnvironmentDefinition

__all__ = ("HOOK_KINDS", "Entry", "GuardEntry", "Hook", "HookKind", "Layer", "Restriction")

HookKind = Literal["pre", "execute", "post", "result", "dispatch_log"]
HOOK_KINDS: tuple[HookKind, ...] = ("pre", "execute", "post", "result", "dispatch_log")

_serials = itertools.count(1)


@dataclass(eq=False, slots=True)
class Entry:
    """One registration: the definition (kept by reference), its condition and layer."""

    definition: ToolDefinition
    when: Callable[[Any], Any] | None
    layer_key: str | None
    serial: int = field(default_factory=lambda: next(_serials))
    output_check: Callable[[Any], list[str]] | None = None
    parameters_snapshot: Any = None
    alive: bool = True


@dataclass(frozen=True, slots=True, eq=False)
class Restriction:
    """A snapshotted allow/deny mask (``None`` = that side absent)."""

    allow: frozenset[str] | None
    deny: frozenset[str] | None

    def admits(self, name: str) -> bool:
        """R-COND-01 for one restriction."""
        if self.allow is not None and name not in self.allow:
            return False
        return self.deny is None or name not in self.deny


@dataclass(eq=False, slots=True)
class GuardEntry:
    """One guard registration (identical functions register independently)."""

    fn: Callable[[Any], str | None]
    active: bool = True


class Hook:
    """One hook registration (the same function may be registered twice, independently)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn


class Layer:
    """The contributions of one context."""

    __slots__ = (
        "environments",
        "executors",
        "guards",
        "hooks",
        "iterating",
        "key",
        "mode",
        "restrictions",
        "tools",
        "version",
    )

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.tools: dict[str, Entry] = {}
        self.restrictions: list[Restriction] = []
        self.guards: list[GuardEntry] = []
        self.iterating = 0
        self.mode: str | None = None
        self.hooks: dict[HookKind, list[Hook]] = {kind: [] for kind in HOOK_KINDS}
        self.executors: list[Any] = []
        self.environments: dict[str, EnvironmentDefinition] = {}
        self.version = 0

    def admits(self, name: str) -> bool:
        """Whether every restriction of this layer admits ``name``."""
        return all(r.admits(name) for r in self.restrictions)

    # ------------------------------------------------------------ guards (live iteration)
    def add_guard(self, guard: GuardEntry) -> None:
        """Append to the current generation (a running evaluation sees it)."""
        if not self.iterating:
            self.guards = [g for g in self.guards if g.active]
        self.guards.append(guard)

    def remove_guard(self, guard: GuardEntry) -> None:
        """Deactivate; a generation left empty is replaced (R-REG-22)."""
        guard.active = False
        if not any(g.active for g in self.guards):
            self.guards = []

    def first_denial(self, execution: Any) -> str | None:
        """Run this layer's guards over the live generation; the first ``str`` denies."""
        generation = self.guards
        self.iterating += 1
        try:
            i = 0
            while i < len(generation):
                guard = generation[i]
                i += 1
                if guard.active:
                    verdict = guard.fn(execution)
                    if verdict is not None:
                        return str(verdict)
        finally:
            self.iterating -= 1
        return None

    @property
    def empty(self) -> bool:
        """Whether the layer holds nothing (it can be reclaimed, R-REG-18)."""
        return not (
            self.tools
            or self.restrictions
            or any(g.active for g in self.guards)
            or self.mode is not None
            or any(self.hooks.values())
            or self.executors
            or self.environments
        )
