"""When a pool's manager learned that each of its workers was gone, and what that proves.

An executor's view of its pool can be older than the manager's: a new executor fetched the
members just before a worker died, or an old one has not sent that worker anything since.
A call it then sends to the dead worker fails with the actor's death, exactly like a call
the worker was running when it died — yet it cannot have run. The manager writes down when
it learned of each death: its own watch on every worker (a call of
:meth:`~toolray_actors.execution._worker.ToolWorker.until_death`, which never answers)
tells it within milliseconds. A call sent *after* that moment never reached a live
process, so the executor may send it to another worker without breaking exactly-once.

Only a death known to have landed is written down: the watch's call failing with Ray's
``ActorDiedError`` for a process that exited (a crash, a SIGKILL, the OOM killer: Ray says
so once its raylet saw the process end; the workers are never restarted). Not a
``ray.kill`` — Ray may report it before the kill lands, while the worker can still take a
message — nor an executor's report of a failed call, which may be a worker unreachable
for a while.

The comparison is exact on one node (both sides read the same monotonic clock); across
nodes it uses the wall clock and counts only a death learned more than
:data:`CLOCK_SKEW_S` before the send. Anything else is the safe answer: the call may have
run (``WORKER_LOST``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ("CLOCK_SKEW_S", "DeathBook", "SentAt")

CLOCK_SKEW_S = 1.0
"""How far apart two nodes' wall clocks may be for a send to count as after a death."""

_KEEP = 4096
"""Deaths remembered per pool (a call that meets an older one is simply ``WORKER_LOST``)."""


@dataclass(frozen=True, slots=True)
class SentAt:
    """When a message left its executor: node, monotonic and wall clock."""

    node: str
    monotonic: float
    wall: float

    @classmethod
    def now(cls, node: str) -> SentAt:
        """This moment, on ``node`` (this process's)."""
        return cls(node, time.monotonic(), time.time())


class DeathBook:
    """The deaths one pool manager (on ``node``) learned of, with when it did."""

    def __init__(self, node: str, keep: int = _KEEP) -> None:
        self.node = node
        self._keep = keep
        self._when: OrderedDict[str, SentAt] = OrderedDict()

    def record(self, wid: str) -> None:
        """``wid`` is gone (the first word counts; later ones are later)."""
        if wid in self._when:
            return
        self._when[wid] = SentAt.now(self.node)
        while len(self._when) > self._keep:
            self._when.popitem(last=False)

    def __contains__(self, wid: object) -> bool:
        return wid in self._when

    def before(self, wid: str, sent: SentAt) -> bool:
        """Whether ``wid``'s death was known here before ``sent`` (the message never ran)."""
        learned = self._when.get(wid)
        if learned is None:
            return False
        if sent.node == learned.node:
            return learned.monotonic < sent.monotonic
        return learned.wall + CLOCK_SKEW_S < sent.wall
