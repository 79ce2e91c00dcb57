"""Leases: which drivers hold a namespace, and whether they are still alive.

Every ``RayRuntime`` holds a lease (an id, its driver's Ray job id, pid and host) and hands
the registry a small object its driver owns (its *anchor*). A lease ends when its runtime
shuts down, or when its anchor is lost because its owner died (Ray raises
``OwnerDiedError``: a driver that exited, crashed or was SIGKILLed). Anchors live in memory
only: a lease restored after the registry actor restarted has none until its runtime
acquires it again, and meanwhile ends when its driver's process is gone from this host.
A non-detached namespace ends with its last lease.
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass

import psutil

__all__ = ("WATCH_EVERY_S", "Lease", "LeaseTable")


WATCH_EVERY_S = 2.0
"""How often the liveness of lease holders is checked (a dead driver is noticed in ≤ 10 s)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """One runtime's hold on a namespace."""

    id: str
    job_id: str
    pid: int
    host: str
    since: float


class LeaseTable:
    """The live leases of one namespace (a plain object: testable without Ray)."""

    def __init__(self, leases: list[Lease] | None = None) -> None:
        self.leases: dict[str, Lease] = {lease.id: lease for lease in leases or ()}
        self.anchors: dict[str, object] = {}
        """Each lease's anchor (an object its driver owns), by lease id; never persisted."""
        self.ever_held = bool(self.leases)

    def acquire(
        self, lease_id: str, job_id: str, pid: int, host: str, anchor: object = None
    ) -> int:
        """Hold (idempotent; a restored lease gets its anchor back); how many are held."""
        self.leases.setdefault(
            lease_id, Lease(id=lease_id, job_id=job_id, pid=pid, host=host, since=time.time())
        )
        if anchor is not None:
            self.anchors[lease_id] = anchor
        self.ever_held = True
        return len(self.leases)

    def release(self, lease_id: str) -> int:
        """Let go (idempotent); returns how many leases remain."""
        self.leases.pop(lease_id, None)
        self.anchors.pop(lease_id, None)
        return len(self.leases)

    def drop(self, dead: set[str]) -> list[Lease]:
        """Forget the leases whose drivers died; returns them."""
        gone = [lease for lease in self.leases.values() if lease.id in dead]
        for lease in gone:
            self.release(lease.id)
        return gone

    def gone_here(self) -> set[str]:
        """Leases without an anchor whose driver ran on this host and is no longer running."""
        here = socket.gethostname()
        return {
            lease.id
            for lease in self.leases.values()
            if lease.id not in self.anchors and lease.host == here and not _running(lease)
        }

    def snapshot(self) -> list[Lease]:
        """The leases, for persistence."""
        return list(self.leases.values())


def _running(lease: Lease) -> bool:
    """Its driver's process still runs (one started after the lease was taken is another)."""
    try:
        return bool(psutil.Process(lease.pid).create_time() <= lease.since + 1.0)
    except psutil.Error:
        return False
