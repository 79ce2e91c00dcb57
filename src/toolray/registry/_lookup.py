"""The lookup protocol: all the pipeline and the batch run ask of a registry.

The pipeline stages and the batch run depend on this protocol, never on ``ToolRegistry``:
the core registry implements it (``_read.ReadSide``), and so does any runtime that hosts
the pipeline over a registry of its own (the Ray layer's executor actors use a core
registry mirror). It refines :class:`~toolray._execution.ExecutionHost`, which is what an
execution exposes of it to policies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from toolray._approval import ApprovalService
from toolray._clock import Clock
from toolray._definition import ToolDefinition
from toolray._execution import ExecutionHost, ToolExecution, ToolExecutionInput, ToolSet
from toolray.environments._instances import Instances
from toolray.farm._controls import FarmControls
from toolray.scheduler._plan import ExecutionMode

from ._layers import Entry, HookKind

__all__ = ("ToolLookup",)


class ToolLookup(ExecutionHost, Protocol):
    """The read side of a registry, as one call and one batch use it."""

    @property
    def clock(self) -> Clock:
        """The clock deadlines and traces run on."""
        ...

    @property
    def farm(self) -> FarmControls:
        """The rate limiter and default result bounds (farm controls) of every call."""
        ...

    @property
    def environments(self) -> Instances:
        """The environment instances calls of an environment's tools run in."""
        ...

    @property
    def approval(self) -> ApprovalService | None:
        """The mounted approval service, if any."""
        ...

    def get(
        self, name: str, scope: str | None = None, tool_set: ToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition ``scope`` sees under ``name`` (``run_code`` when presented)."""
        ...

    def executable(
        self, name: str, scope: str | None = None, tool_set: ToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition a call may execute (the step's set decides, else unconditional)."""
        ...

    def resolve_entry(
        self, name: str, scope: str | None, tool_set: ToolSet | None, parent: Any
    ) -> Entry | None:
        """The registration a call executes now (collapse and ``run_code`` included)."""
        ...

    def output_check(self, entry: Entry) -> Callable[[Any], list[str]]:
        """The entry's compiled output validator."""
        ...

    def is_collapsed(self, name: str, scope: str | None, parent: Any) -> bool:
        """Whether the Code Mode collapse refuses the call (R-COND-09)."""
        ...

    def check_guards(self, execution: ToolExecution) -> str | None:
        """The first guard denial on the caller's chain, or ``None``."""
        ...

    def guarded(self, scope: str | None) -> bool:
        """Whether any guard stands on ``scope``'s chain (the global layer's included)."""
        ...

    def hooks(self, kind: HookKind, scope: str | None) -> list[Callable[..., Any]]:
        """The hooks of ``kind`` a call from ``scope`` runs."""
        ...

    def execution_mode(self, inp: ToolExecutionInput) -> ExecutionMode:
        """``"parallel"`` or ``"exclusive"`` for one call (fail-closed)."""
        ...
