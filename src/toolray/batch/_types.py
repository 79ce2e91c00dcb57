"""Batch values and the executor seam (B-SCHED)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

from toolray._content import UserMessage
from toolray._definition import ToolDefinition
from toolray._eventlog import LogStep
from toolray._execution import ToolSet
from toolray._faults import FAULT_CLASS_NAMES
from toolray._outcomes import ToolExecutionFailure, ToolExecutionResult
from toolray._signals import AbortSignal
from toolray.pipeline._deadline import check_deadline

__all__ = (
    "LogStep",
    "ToolBatchInput",
    "ToolBatchResult",
    "ToolCall",
    "ToolCallResult",
    "ToolExecutor",
    "ToolModelInput",
    "check_cap",
    "check_deadline",
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

    def __reduce__(self) -> tuple[Any, ...]:  # positional: pickled per call on Ray
        return (ToolCall, (self.id, self.name, self.arguments))


@dataclass(frozen=True, slots=True, init=False)
class ToolBatchInput:
    """A complete batch of raw model calls, in model order.

    ``signal`` is optional: without one the batch runs under a signal that never fires (it
    can still be cancelled by cancelling the task that awaits it).

    Two calls with the same id are refused (``ValueError``): a result is matched to its call
    by id, in every backend, event log and adapter.

    ``deadline_s`` is a budget for the whole batch, counted from the moment it is submitted
    (``execute_batch``): queueing, rate-limit waits, retries, every call. When it passes, calls
    not started end ``DEADLINE_EXCEEDED`` without running, running calls get the
    cancellation ladder and end ``DEADLINE_EXCEEDED`` unless they finish first, and the batch
    returns by ``deadline_s`` + the executor's ``kill_grace_ms`` + 100 ms.

    Example:
        >>> batch = ToolBatchInput([ToolCall("c1", "echo", "{}")], deadline_s=30)
        >>> batch.signal.aborted, batch.scope, batch.deadline_s
        (False, None, 30.0)
    """

    calls: Sequence[ToolCall]
    signal: AbortSignal
    max_parallel_tool_calls: int | None
    scope: str | None
    tool_set: ToolSet | None
    log: LogStep | None
    deadline_s: float | None

    def __init__(
        self,
        calls: Sequence[ToolCall],
        signal: AbortSignal | None = None,
        *,
        max_parallel_tool_calls: int | None = None,
        scope: str | None = None,
        tool_set: ToolSet | None = None,
        log: LogStep | None = None,
        deadline_s: float | None = None,
    ) -> None:
        if max_parallel_tool_calls is not None:
            check_cap(max_parallel_tool_calls)
        deadline_s = check_deadline(deadline_s)
        if log is not None and scope is None:
            raise ValueError("a log step requires scope (the agent whose session records it)")
        if signal is None:
            signal = AbortSignal()  # a signal that never fires
        elif not isinstance(signal, AbortSignal):
            raise TypeError(f"signal must be an AbortSignal, not {type(signal).__name__}")
        calls = tuple(calls)
        _check_calls(calls)
        for name, value in (
            ("calls", calls),
            ("signal", signal),
            ("max_parallel_tool_calls", max_parallel_tool_calls),
            ("scope", scope),
            ("tool_set", tool_set),
            ("log", log),
            ("deadline_s", deadline_s),
        ):
            object.__setattr__(self, name, value)


def _check_calls(calls: tuple[ToolCall, ...]) -> None:
    """Every call a ``ToolCall``, each with an id of its own (results are matched by id)."""
    first: dict[str, int] = {}
    for index, call in enumerate(calls, 1):
        if not isinstance(call, ToolCall):
            raise TypeError(f"calls must be ToolCall values, not {type(call).__name__}")
        seen = first.setdefault(call.id, index)
        if seen != index:
            raise ValueError(
                f'call id "{call.id}" is used twice in one batch (calls {seen} and {index}); '
                "each call needs an id of its own, as its result is matched to it by id"
            )


@dataclass(frozen=True, slots=True)
class ToolCallResult:
    """One settled result, correlated with its model call."""

    call_id: str
    result: ToolExecutionResult

    def __reduce__(self) -> tuple[Any, ...]:  # positional: pickled per result on Ray
        return (ToolCallResult, (self.call_id, self.result))


@dataclass(frozen=True, slots=True)
class ToolBatchResult:
    """Model-ordered outcomes, contexts for the next step, and whether the turn concludes.

    ``faults`` counts the failures by fault class (every class listed, zeros included).
    """

    results: tuple[ToolCallResult, ...]
    additional_contexts: tuple[UserMessage, ...]
    concluded: bool

    @property
    def faults(self) -> Mapping[str, int]:
        """Failures per fault class: ``{"input": 0, "policy": 0, "tool": 1, …}`` (read-only)."""
        counts: dict[str, int] = dict.fromkeys(FAULT_CLASS_NAMES, 0)
        for item in self.results:
            result = item.result
            if isinstance(result, ToolExecutionFailure):
                counts[result.error.fault] += 1
        return MappingProxyType(counts)


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
