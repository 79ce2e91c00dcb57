"""Leases: which drivers hold a namespace, and whether they are still alive.

Every ``RayRuntime`` holds a lease (an id, its driver's Ray job id, pid and host) and hands
the registry a small object its driver owns: its *anchor*. A lease ends when its runtime shuts
down, or when its anchor is lost because its owner died (Ray raises ``OwnerDiedError`` for a
driver that exited, crashed or was SIGKILLed). The anchor is persisted with the lease as an
out-of-band serialized object ref, which Ray keeps pinned while its owner lives, so a lease
restored after the registry actor restarted is judged the same way, on any host.
A non-detached namespace ends with its last lease.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ("WATCH_EVERY_S", "Lease", "LeaseTable")


WATCH_EVERY_S = 2.0
"""How often the liveness of lease holders is checked (a dead driver is noticed in ≤ 10 s)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """One runtime's hold on a namespace (``anchor``: its driver's object, serialized)."""

    id: str
    job_id: str
    pid: int
    host: str
    since: float
    anchor: bytes = b""


class LeaseTable:
    """The live leases of one namespace (a plain object: testable without Ray).

    ``thaw`` turns a persisted anchor back into the object ref it was (``_remote.thaw``);
    the refs are made once per lease and kept in :attr:`anchors`.
    """

    def __init__(
        self, leases: list[Lease] | None = None, thaw: Callable[[bytes], object] | None = None
    ) -> None:
        self.leases: dict[str, Lease] = {lease.id: lease for lease in leases or ()}
        self._thaw = thaw
        self.anchors: dict[str, object] = {}
        """Each lease's anchor ref, by lease id (only leases that have one)."""
        for lease in self.leases.values():
            self._hold(lease)
        self.ever_held = bool(self.leases)

    def _hold(self, lease: Lease) -> None:
        if lease.anchor and self._thaw is not None:
            self.anchors[lease.id] = self._thaw(lease.anchor)

    def acquire(self, lease_id: str, job_id: str, pid: int, host: str, anchor: bytes = b"") -> int:
        """Hold (idempotent); returns how many leases are held."""
        if lease_id not in self.leases:
            lease = Lease(
                id=lease_id, job_id=job_id, pid=pid, host=host, since=time.time(), anchor=anchor
            )
            self.leases[lease_id] = lease
            self._hold(lease)
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

    async def dead(
        self, alive: Callable[[object, float], Awaitable[bool]], timeout_s: float
    ) -> set[str]:
        """The leases whose anchors ``alive`` (``_remote.owner_alive``) finds dead, at once."""
        anchors = list(self.anchors.items())
        found = await asyncio.gather(*(alive(ref, timeout_s) for _, ref in anchors))
        return {lease for (lease, _), up in zip(anchors, found, strict=True) if not up}

    def snapshot(self) -> list[Lease]:
        """The leases, for persistence."""
        return list(self.leases.values())
