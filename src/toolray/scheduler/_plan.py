"""Planning a batch into stages: pure functions, no clock, tasks or Ray.

A stage starts at the first unscheduled call. An exclusive call is a stage of its own (a
barrier); a parallel call opens a group that admits the following calls while they stay
parallel (B-SCHED-5). The scheduler asks for one stage at a time, because each later call of
a parallel group is reclassified just before it starts (B-SCHED-13): :func:`next_stage`
gives the stage's kind and its widest extent, and the runner cuts it short where a
reclassified call turns exclusive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ("ExecutionMode", "Stage", "next_stage", "plan_stages")

ExecutionMode = Literal["parallel", "exclusive"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Stage:
    """Calls ``start`` to ``stop`` (exclusive) run as one group of ``kind``."""

    kind: ExecutionMode
    start: int
    stop: int

    @property
    def indices(self) -> range:
        """The call indices of the stage."""
        return range(self.start, self.stop)


def next_stage(start: int, count: int, head: ExecutionMode) -> Stage:
    """The stage opened at ``start`` by a head call classified ``head``, at its widest."""
    if not 0 <= start < count:
        raise ValueError("start must index a call")
    stop = start + 1 if head == "exclusive" else count
    return Stage(kind=head, start=start, stop=stop)


def plan_stages(modes: Sequence[ExecutionMode]) -> list[Stage]:
    """The full plan for calls whose modes are known and do not change."""
    stages: list[Stage] = []
    start = 0
    while start < len(modes):
        widest = next_stage(start, len(modes), modes[start])
        stop = widest.start + 1
        while stop < widest.stop and modes[stop] == "parallel":
            stop += 1
        stages.append(Stage(kind=widest.kind, start=start, stop=stop))
        start = stop
    return stages
