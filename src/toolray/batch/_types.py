"""Batch values and the executor seam (B-SCHED)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, runtime_checkable

from toolray._content import UserMessage
from toolray._definition import ToolDefinition
from toolray._eventlog import LogStep
from toolray._execution import ToolSet
from toolray._outcomes import ToolExecutionResult
from toolray._signals import AbortSignal

__all__ = (
    "LogStep",
    "ToolBatchInput",
    "ToolBatchResult",
    "ToolCall",
    "ToolCallResult",
    "ToolExecutor",
    "ToolModelInput",
    "check_cap",
)


def check_cap(value: Any, what: str = "max_parallel_tool_calls") -> int:
    """A positive ``int`` cap, or ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive integer")
    return value


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One raw model call, as the model emitted it.

    ``arguments`` is the model's JSON text (``""`` means ``{}``; invalid JSON is passed on as
    the raw string) or a ``Mapping`` already parsed (Anthropic's ``tool_use.input``). Any
    other value is accepted here and becomes that call's ``INVALID_ARGS`` failure when the
    batch runs: one bad call never breaks a batch (B-ERR-1).

    Example:
        >>> ToolCall("c1", "echo", {"text": "hi"}).arguments
        {'text': 'hi'}
        >>> ToolCall(1, "echo", "{}")
        Traceback (most recent call last):
        ...
        TypeError: ToolCall.id must be a str, not int
    """

    id: str
    name: str
    arguments: str | Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.id, str):
            raise TypeError(f"ToolCall.id must be a str, not {type(self.id).__name__}")
        if not isinstance(self.name, str):
            raise TypeError(f"ToolCall.name must be a str, not {type(self.name).__name__}")


@dataclass(frozen=True, slots=True)
class ToolBatchInput:
    """A complete batch of raw model calls, in model order."""

    calls: Sequence[ToolCall]
    signal: AbortSignal
    _: KW_ONLY
    max_parallel_tool_calls: int | None = None
    scope: str | None = None
    tool_set: ToolSet | None = None
    log: LogStep | None = None

    def __post_init__(self) -> None:
        if self.max_parallel_tool_calls is not None:
            check_cap(self.max_parallel_tool_calls)
        if self.log is not None and self.scope is None:
            raise ValueError("a log step requires scope (the agent whose session records it)")
        for call in self.calls:
            if not isinstance(call, ToolCall):
                raise TypeError(f"calls must be ToolCall values, not {type(call).__name__}")
        object.__setattr__(self, "calls", tuple(self.calls))


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """One settled result, correlated with its model call."""

    call_id: str
    result: ToolExecutionResult


@dataclass(frozen=True, slots=True)
class ToolBatchResult:
    """Model-ordered outcomes, contexts for the next step, and whether the turn concludes."""

    results: tuple[ToolCallResult, ...]
    additional_contexts: tuple[UserMessage, ...]
    concluded: bool


@dataclass(frozen=True, slots=True)
class ToolModelInput:
    """What an executor tells the model: schemas and the names it may call."""

    schemas: list[dict[str, Any]]
    known_names: list[str]


@runtime_checkable
class ToolExecutor(Protocol):
    """Runs whole batches: one outcome per input call, in input order."""

    sections: Sequence[Any]

    def describe(self, definitions: Sequence[ToolDefinition]) -> ToolModelInput:
        """Schemas and names for the model."""
        ...

    async def execute(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run the batch; never settle while started work is still running."""
        ...
