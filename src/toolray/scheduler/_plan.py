"""Planning calls into stages: pure functions, no clock, tasks or Ray.

A stage starts at the first unscheduled call. An exclusive call is a stage of its own (a
barrier); a parallel call opens a group that admits the following calls while they stay
parallel (B-SCHED-5). The scheduler (:mod:`toolray.scheduler._engine`) asks for one stage
at a time, because each later call of a parallel group is reclassified just before it
starts (B-SCHED-13): :func:`next_stage` gives the stage's kind and its widest extent,
:func:`joins` says whether the next call, as classified now, belongs to it, and :func:`cut`
ends the stage where a call does not. :func:`plan_stages` is the same three steps over modes
known in advance — the whole plan of a batch whose classification does not change.

A lane whose calls keep arriving (a Code Mode program's sub-calls) has no known count: it
plans with :data:`OPEN_ENDED`, so a parallel stage reaches as far as the calls that come.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

__all__ = ("OPEN_ENDED", "ExecutionMode", "Stage", "cut", "joins", "next_stage", "plan_stages")

ExecutionMode = Literal["parallel", "exclusive"]

OPEN_ENDED: Final = sys.maxsize
"""The call count of a lane whose calls keep arriving."""


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


def joins(stage: Stage, index: int, mode: ExecutionMode) -> bool:
    """Whether call ``index``, classified ``mode`` just before it starts, joins ``stage``.

    Only a call after the head and inside the stage's extent is asked; it joins a parallel
    stage while it is parallel itself. A call that does not join heads the next stage.
    """
    if not stage.start < index < stage.stop:
        raise ValueError("index must be a later call inside the stage")
    return stage.kind == "parallel" and mode == "parallel"


def cut(stage: Stage, stop: int) -> Stage:
    """``stage`` ended at ``stop``: the call there did not join it."""
    if not stage.start < stop <= stage.stop:
        raise ValueError("a stage keeps its head and cannot grow")
    return replace(stage, stop=stop)


def plan_stages(modes: Sequence[ExecutionMode]) -> list[Stage]:
    """The full plan for calls whose modes are known and do not change."""
    stages: list[Stage] = []
    start = 0
    while start < len(modes):
        stage = next_stage(start, len(modes), modes[start])
        stop = start + 1
        while stop < stage.stop and joins(stage, stop, modes[stop]):
            stop += 1
        stages.append(cut(stage, stop))
        start = stop
    return stages
