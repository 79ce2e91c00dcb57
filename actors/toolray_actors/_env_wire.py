"""The records environments cross Ray with: requests, placements, fork copies, snapshots."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = (
    "EnvClose",
    "EnvForkHere",
    "EnvForkIn",
    "EnvForkOut",
    "EnvOpen",
    "EnvRequest",
    "EnvRun",
    "EnvSnapshot",
    "EnvStatusOf",
    "ForkCopy",
    "InstanceInfo",
    "InstanceView",
    "SnapshotReply",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceInfo:
    """Where a worker keeps a new instance: the process holding it, and its node."""

    pid: int
    node: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ForkCopy:
    """A fork's copy on its way from the source's executor to the target's.

    Either ``snapshot`` (a reference to its bytes in the object store, for ``"snapshot"``
    and callable forks) or a live instance (``"process"`` forks: the worker ``wid`` of pool
    ``pool`` holds it as ``iid``, in process ``pid``). ``key`` is the environment's
    definition's cache key; ``blob`` its pickled definition.
    """

    name: str
    key: str
    blob: bytes
    snapshot: object = None
    size: int = 0
    pool: str = ""
    wid: str = ""
    iid: str = ""
    pid: int = 0
    node: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceView:
    """One instance as ``rt.stats()`` lists it (from its executor's table)."""

    scope: str | None
    name: str
    state: str
    pid: int | None
    calls: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvOpen:
    """Open ``name``'s instance of ``scope`` with ``config`` (closing the previous one)."""

    scope: str | None
    name: str
    config: object = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvSnapshot:
    """The instance's snapshot (its bytes, with its definition's key and blob)."""

    scope: str | None
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvRun:
    """``fn(state, *args)`` where the state lives; ``data`` is the pickled ``(fn, args)``."""

    scope: str | None
    name: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvForkOut:
    """A copy of the instance for ``to_scope`` (its :class:`ForkCopy`)."""

    scope: str | None
    name: str
    to_scope: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvForkHere:
    """Fork into ``to_scope``, served by the same executor actor (the copy stays there)."""

    scope: str | None
    name: str
    to_scope: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvForkIn:
    """``scope``'s instance becomes ``copy`` (its previous one closed first)."""

    scope: str | None
    name: str
    copy: ForkCopy


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvClose:
    """Close the instance."""

    scope: str | None
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvStatusOf:
    """The instance's status."""

    scope: str | None
    name: str


EnvRequest = (
    EnvOpen | EnvSnapshot | EnvRun | EnvForkOut | EnvForkHere | EnvForkIn | EnvClose | EnvStatusOf
)
"""What a driver's environment handle asks of the executor actor serving its scope."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotReply:
    """A snapshot as it leaves the executor: its bytes, and what restores them."""

    data: bytes
    key: str
    blob: bytes
