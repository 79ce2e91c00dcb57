"""The call record: one call between the pipeline's stages.

``prepare`` makes it, ``dispatch`` runs its body, ``complete`` turns it into the final
result; the policy, dispatch and finish stages and the batch run all pass it along. Its
``step`` says which stage comes next.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from toolray._execution import ToolDispatchExecution, ToolExecutionInput
from toolray._normalize import normalize_value, unknown_tool
from toolray._outcomes import ToolExecutionResult
from toolray.registry._lookup import ToolLookup

from ._observe import Observation

__all__ = ("Call", "Step")

Step = Literal["dispatch", "post", "final"]
"""What a call needs next: its body (``dispatch``), post-execute (``post``), or nothing."""


@dataclass(eq=False, slots=True)
class Call:
    """One call between stages: its execution, what comes next, and its result so far."""

    registry: ToolLookup
    input: ToolExecutionInput
    execution: ToolDispatchExecution
    finalizer: Any
    project: Any
    definition: Any = None  # the definition visible at prepare (its farm controls)
    step: Step = "final"
    result: ToolExecutionResult | None = None
    body_invoked: bool = False
    notes: dict[str, Any] = field(default_factory=dict)  # runner details for traces
    link: Any = None
    """Its place in a chain (``scheduler._chain.Link``) when its runner gates its stages."""
    sealed: bool = False
    """A chained call whose stage was over, where it ran, before an abort arrived there:
    stage by stage it would have committed before the next stage started, so an abort
    leaves its success alone."""
    environment: Any = None
    """The live handle of its environment's instance while its body runs (the backend's
    own: a Ray body runner reads it to send the call where the instance lives)."""
    in_time: bool = False
    """Its dispatch stage settled before the caller's signal fired: a batch deadline that
    passes while it waits for its commit leaves its success alone (an abort does not)."""
    observed: Observation | None = None
    """Its observers' handles (``None``: nobody observes it); ``observed.trace`` is the span
    its body runs in."""

    def settle(self, step: Step, result: ToolExecutionResult | None = None) -> Call:
        """Move to ``step`` with ``result``."""
        self.step = step
        self.result = result
        return self

    def log(self, event: dict[str, Any]) -> None:
        """Append ``event`` to the log of the call's batch step, if it has one."""
        step = self.input.log
        if step is not None:
            step.sink.append({"turn": step.turn, "step": step.step, **event})

    def renormalize(
        self, value: Any, contexts: tuple[Any, ...], concludes: bool
    ) -> ToolExecutionResult:
        """A value that replaces the body's, validated and rendered as the tool's own.

        The tool is resolved again: if it is gone since, the call fails as an unknown tool.
        """
        inp = self.input
        entry = self.registry.resolve_entry(inp.name, inp.scope, inp.tool_set, inp.parent)
        if entry is None:
            return unknown_tool(inp.name)
        return normalize_value(
            name=inp.name,
            value=value,
            arguments=self.execution.arguments,
            output=entry.definition.output,
            check=self.registry.output_check(entry),
            top_level=inp.parent is None,
            contexts=contexts,
            concludes_turn=concludes,
        )
