"""How many call processes a worker keeps: when to fork more, when to let idle ones go.

Pure (a clock reading is passed in), so the policy is tested alone:

- calls that wait for a process make more be forked once they have waited
  :data:`GROW_AFTER_S` — if the bodies seen lately are long (a median of :data:`LONG_CALL_S`
  or more, as timed inside their processes — a median, so a loaded machine's preemptions do
  not count, and without the loading of their tool's code): such calls hold their
  process, and more processes let the waiting calls start now;
- short calls free their process again at once: a burst of them is CPU-bound, and more
  processes would only add forks and wake-ups, so none are forked — unless no process has
  come free for :data:`STUCK_S` (every one held by a slow or stuck call);
- never more than the worker's limit — unless the pool sets one, derived from its node
  (:func:`node_limit`, never below ``max_concurrency + 8``), so a pool grows with waiting
  I/O-bound calls by default; idle processes beyond the warm ones go after :data:`IDLE_S`.
"""

from __future__ import annotations

import os
import statistics
from collections import deque
from dataclasses import dataclass, field

__all__ = (
    "CALLS_PER_CPU",
    "GROW_AFTER_S",
    "IDLE_S",
    "LONG_CALL_S",
    "MAX_DERIVED",
    "PROCESS_MB",
    "STUCK_S",
    "Sizing",
    "derived_limit",
    "node_limit",
)

GROW_AFTER_S = 0.002
"""How long calls wait for a free process before more may be forked."""
LONG_CALL_S = 0.001
"""An average call length from which more processes help waiting calls."""
STUCK_S = 1.0
"""No process free for this long: more are forked whatever the calls' length."""
IDLE_S = 60.0
"""Idle processes beyond the warm ones exit after this long."""
_SAMPLES = 32
CALLS_PER_CPU = 64
"""Call processes per CPU at most: I/O-bound bodies mostly wait, but every call still costs
its process a wake-up or two, and past this many a small node spends more on switching
between processes than the extra ones save. On 2 CPUs, the 200-trajectory rollout run
interleaved: 72 processes per worker 683–766 calls/s, 128 (this) 742–833, 256 612–626."""
PROCESS_MB = 32
"""Memory set aside per call process (a fork of the template shares most of its pages)."""
MAX_DERIVED = 1024
"""The derived limit never exceeds this (per worker)."""
_FLOOR = 72  # what a default worker ran before (max_concurrency 64 + 8)


def derived_limit(cpus: int, available_mb: float, floor: int = _FLOOR) -> int:
    """A worker's call-process limit: ``min(64 × CPUs, memory / 32 MiB, 1024) >= floor``."""
    by_memory = int(max(0.0, available_mb) // PROCESS_MB)
    return max(floor, min(max(1, cpus) * CALLS_PER_CPU, by_memory, MAX_DERIVED))


def node_limit() -> int:
    """:func:`derived_limit` of this process's node (CPUs it may use, memory available)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    try:
        available_mb = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (ValueError, OSError, AttributeError):
        available_mb = 0.0  # unknown: the floor
    return derived_limit(cpus, available_mb)


@dataclass
class Sizing:
    """The sizing state of one worker's call processes."""

    warm: int
    limit: int
    recent: deque[float] = field(default_factory=lambda: deque(maxlen=_SAMPLES))
    """How long the latest bodies ran (seconds, timed in their processes)."""
    released_at: float = 0.0

    def released(self, now: float) -> None:
        """A process came free."""
        self.released_at = now

    def took(self, seconds: float) -> None:
        """A body ran this long (timed in its process, its tool's loading not counted)."""
        self.recent.append(seconds)

    @property
    def call_s(self) -> float | None:
        """How long a body runs, typically (the median of the latest); ``None``: none yet."""
        return statistics.median(self.recent) if self.recent else None

    def forks_wanted(
        self, now: float, waiting: int, live: int, forking: int, waiting_since: float
    ) -> int | None:
        """How many to fork for ``waiting`` calls now; ``None``: look again later.

        ``waiting_since``: when the oldest of them began to wait.
        """
        if not waiting:
            return 0
        stuck = now - max(self.released_at, waiting_since) >= STUCK_S
        typical = self.call_s
        short = typical is None or typical < LONG_CALL_S  # unknown: wait and see
        if live and short and not stuck:
            return None
        return max(0, min(waiting - forking, self.limit - live - forking))

    def trim(self, now: float, idle_since: list[float]) -> int:
        """How many of the longest-idle processes (``idle_since``, oldest first) to let go."""
        extra = 0
        while len(idle_since) - extra > self.warm and now - idle_since[extra] > IDLE_S:
            extra += 1
        return extra
