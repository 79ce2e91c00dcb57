"""Leases: which drivers hold a namespace, and whether they are still alive.

Every ``RayRuntime`` holds a lease (an id and its driver's Ray job id). A lease ends when its
runtime shuts down, or when its driver's job is dead in the GCS job table (a driver that
exited, crashed or was SIGKILLed). A non-detached namespace ends with its last lease.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = ("WATCH_EVERY_S", "Lease", "LeaseTable", "dead_jobs")


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
        self.ever_held = bool(self.leases)

    def acquire(self, lease_id: str, job_id: str, pid: int, host: str) -> int:
        """Hold (idempotent); returns how many leases are held."""
        self.leases.setdefault(
            lease_id, Lease(id=lease_id, job_id=job_id, pid=pid, host=host, since=time.time())
        )
        self.ever_held = True
        return len(self.leases)

    def release(self, lease_id: str) -> int:
        """Let go (idempotent); returns how many leases remain."""
        self.leases.pop(lease_id, None)
        return len(self.leases)

    def drop_jobs(self, dead: set[str]) -> list[Lease]:
        """Forget the leases of dead jobs; returns them."""
        gone = [lease for lease in self.leases.values() if lease.job_id in dead]
        for lease in gone:
            del self.leases[lease.id]
        return gone

    def job_ids(self) -> set[str]:
        """The job ids holding leases."""
        return {lease.job_id for lease in self.leases.values()}

    def snapshot(self) -> list[Lease]:
        """The leases, for persistence."""
        return list(self.leases.values())


def dead_jobs(job_ids: set[str]) -> set[str]:
    """Which of ``job_ids`` the GCS job table reports dead (blocking; run it in a thread)."""
    if not job_ids:
        return set()
    from ray._private import state

    jobs: Any = state.jobs
    table: list[dict[str, Any]] = jobs()
    alive = {str(j["JobID"]) for j in table if not j.get("IsDead")}
    known = {str(j["JobID"]) for j in table}
    # A job the table does not know yet (just started) counts as alive.
    return {j for j in job_ids if j in known and j not in alive}
