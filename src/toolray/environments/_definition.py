"""``define_environment``: the definition of an environment, and an instance's status."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from toolray._definition import Placement

__all__ = (
    "FORK_MODES",
    "EnvironmentDefinition",
    "EnvironmentState",
    "EnvironmentStatus",
    "ForkMode",
    "define_environment",
)

ForkMode = Literal["snapshot", "process"] | Callable[[Any], Any] | None
FORK_MODES = ("snapshot", "process")
"""How ``fork()`` copies a state, besides a callable of the definition's own or ``None``."""

EnvironmentState = Literal["open", "parked", "lost", "closed"]

DEFAULT_PARK_AFTER_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentDefinition:
    """A registered environment: how one instance is made, copied, parked and ended.

    Built by :func:`define_environment` (which checks every field); registered with
    ``register_environment`` on a registry or a scope handle.
    """

    name: str
    create: Callable[[Any], Any]
    close: Callable[[Any], Awaitable[None] | None] | None = None
    snapshot: Callable[[Any], bytes] | None = None
    restore: Callable[[bytes], Any] | None = None
    fork: ForkMode = "snapshot"
    placement: Placement | None = None
    park_after_s: float | None = DEFAULT_PARK_AFTER_S
    description: str | None = None

    def __post_init__(self) -> None:
        check_environment(self)
        if self.park_after_s is not None:
            object.__setattr__(self, "park_after_s", float(self.park_after_s))


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentStatus:
    """One instance as it is now (``EnvironmentHandle.status()``).

    ``state``: ``"open"`` (live where its tools run), ``"parked"`` (its snapshot waits in
    the object store; its next use restores it), ``"lost"`` (its process died: every use
    fails ``ENVIRONMENT_LOST`` until ``open()``) or ``"closed"`` (none, or closed).
    ``opened_at`` / ``last_call_at`` are wall-clock seconds (``time.time()``); ``bytes``
    is the size of its last snapshot when one was taken.
    """

    name: str
    scope: str | None
    state: EnvironmentState
    node: str | None = None
    pid: int | None = None
    calls: int = 0
    opened_at: float | None = None
    last_call_at: float | None = None
    bytes: int | None = None


def _callable_or_none(value: Any, what: str, name: str) -> None:
    if value is not None and not callable(value):
        raise TypeError(f'environment "{name}": {what} must be callable or None')


def check_environment(definition: EnvironmentDefinition) -> None:
    """The definition-time checks (``TypeError`` / ``ValueError`` naming the field)."""
    name = definition.name
    if not isinstance(name, str) or not name:
        raise ValueError(f"an environment's name must be a non-empty str, not {name!r}")
    if not callable(definition.create):
        raise TypeError(f'environment "{name}": create must be callable (config) -> state')
    _callable_or_none(definition.close, "close", name)
    _callable_or_none(definition.snapshot, "snapshot", name)
    _callable_or_none(definition.restore, "restore", name)
    fork = definition.fork
    if fork is not None and not callable(fork) and fork not in FORK_MODES:
        raise ValueError(
            f'environment "{name}": fork must be "snapshot", "process", a callable '
            f"(state) -> state or None, not {fork!r}"
        )
    placement = definition.placement
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f'environment "{name}": placement must be a Placement or None')
    park = definition.park_after_s
    if park is not None and (
        isinstance(park, bool)
        or not isinstance(park, int | float)
        or not math.isfinite(park)
        or park <= 0
    ):
        raise ValueError(
            f'environment "{name}": park_after_s must be a positive number of seconds or '
            f"None (never park), not {park!r}"
        )
    if definition.description is not None and not isinstance(definition.description, str):
        raise TypeError(f'environment "{name}": description must be a str or None')


def define_environment(
    name: str,
    create: Callable[[Any], Any],
    close: Callable[[Any], Awaitable[None] | None] | None = None,
    snapshot: Callable[[Any], bytes] | None = None,
    restore: Callable[[bytes], Any] | None = None,
    fork: ForkMode = "snapshot",
    placement: Placement | None = None,
    park_after_s: float | None = DEFAULT_PARK_AFTER_S,
    *,
    description: str | None = None,
) -> EnvironmentDefinition:
    """Define an environment: one instance of its state per scope, where its tools run.

    ``create(config)`` makes a state (sync or async; it runs where the state lives),
    ``close(state)`` ends one (once), ``snapshot(state) -> bytes`` / ``restore(bytes)``
    copy one (default: cloudpickle), ``fork`` says how ``fork()`` copies it
    (``"snapshot"``, the safe default; ``"process"``, a copy-on-write fork of the
    instance's process, only for states that hold no external resource; a callable
    ``(state) -> state``; ``None``: not forkable). An instance idle for ``park_after_s``
    seconds (``None``: never) is parked: snapshotted and freed, restored on its next use.

    Example:
        >>> counter = define_environment("counter", create=lambda config: {"n": 0})
        >>> counter.fork, counter.park_after_s
        ('snapshot', 60.0)
    """
    return EnvironmentDefinition(
        name=name,
        create=create,
        close=close,
        snapshot=snapshot,
        restore=restore,
        fork=fork,
        placement=placement,
        park_after_s=park_after_s,
        description=description,
    )
