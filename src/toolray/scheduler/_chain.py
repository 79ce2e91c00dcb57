"""Chains: a closed lane's stages handed to a runner at once, when nothing can tell.

Stage by stage, every barrier costs a round trip to where the bodies run: the group's
outcomes come back, commit, and only then does the exclusive call go out (B-SCHED-14). When
no hook, guard, approval service, observer (but counters) or log can see the order of starts
and commits, a runner that can gate bodies itself (a Ray worker) may take the whole plan at
once: each dispatched call carries its :class:`Link` — its place in the chain and its
stage — and the runner starts a call only once every call of the earlier stages has
ended, at most ``cap`` at a time, in model order. The results, their order and every
barrier are the same; what is saved is one round trip per stage.

:func:`plan_chain` decides: it gives the stages of the calls left, or ``None`` when the lane
must run stage by stage (a hook, guard or approval service on the scope; a tool the runner
cannot gate; a single stage, which has no barrier to save). The plan is fixed when the chain
starts: a registry change made while it runs applies from the next batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toolray._execution import ToolExecutionInput
from toolray.registry._layers import HOOK_KINDS
from toolray.registry._lookup import ToolLookup

from ._plan import ExecutionMode, Stage, plan_stages

__all__ = ("ChainRunner", "Link", "links_of", "plan_chain")


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A dispatched call's place in its chain (positions count dispatched calls only)."""

    chain: str
    """The chain's id (unique per runner)."""
    position: int
    """The call's place among the chain's dispatched calls, in model order."""
    stage_start: int
    """The position of its stage's first call: it starts once every earlier one has ended."""
    size: int
    """How many calls the chain dispatches."""
    cap: int
    """At most this many of the chain's calls run at once."""


@runtime_checkable
class ChainRunner(Protocol):
    """A body runner that can gate a chain's calls where the bodies run."""

    def chainable(self, definition: Any, cap: int) -> bool:
        """Whether calls of ``definition`` can wait for their turn where bodies run."""
        ...

    def chain(self) -> str:
        """A new chain's id."""
        ...

    def unlinked(self, link: Link) -> None:
        """A linked call ended without reaching the runner (its place counts as ended)."""
        ...

    async def sealed(self, link: Link) -> bool:
        """After an abort: whether the call's stage was over before the abort reached it.

        Stage by stage it would have committed by then: its success stands (``Call.sealed``).
        """
        ...


def plan_chain(
    lookup: ToolLookup,
    inputs: Sequence[ToolExecutionInput],
    start: int,
    runner: ChainRunner,
    cap: int,
) -> list[Stage] | None:
    """The stages of calls ``start`` onwards, or ``None``: run them stage by stage."""
    left = inputs[start:]
    scopes = {inp.scope for inp in left}
    if lookup.approval is not None or any(
        lookup.hooks(kind, scope) for scope in scopes for kind in HOOK_KINDS
    ):
        return None
    if any(lookup.guarded(scope) for scope in scopes):
        return None
    modes: list[ExecutionMode] = []
    for inp in left:
        if inp.parent is not None or inp.log is not None:
            return None
        try:
            definition = lookup.executable(inp.name, inp.scope, inp.tool_set)
        except Exception:
            return None
        if definition is None or not runner.chainable(definition, cap):
            return None
        modes.append(lookup.execution_mode(inp))
    stages = plan_stages(modes)
    if len(stages) < 2 and len(modes) <= cap:  # no barrier and no rolling pool to save
        return None
    return [Stage(kind=s.kind, start=s.start + start, stop=s.stop + start) for s in stages]


def links_of(
    chain: str, stages: Sequence[Stage], dispatched: Sequence[int], cap: int
) -> list[Link]:
    """The links of the ``dispatched`` calls (indices into the stages' calls, in order)."""
    stage_of = {k: stage for stage in stages for k in stage.indices}
    links: list[Link] = []
    opened: dict[int, int] = {}  # a stage's start → the position of its first dispatched call
    for position, k in enumerate(dispatched):
        first = opened.setdefault(stage_of[k].start, position)
        links.append(
            Link(
                chain=chain,
                position=position,
                stage_start=first,
                size=len(dispatched),
                cap=1 if stage_of[k].kind == "exclusive" else cap,
            )
        )
    return links
