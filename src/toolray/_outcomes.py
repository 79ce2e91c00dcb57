"""Outcomes: the frozen results of a call, which cross every stage (and processes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._content import ContentBlock, UserMessage
from ._faults import FaultClass, check_fault, fault_of

__all__ = (
    "ToolErrorInfo",
    "ToolExecutionFailure",
    "ToolExecutionResult",
    "ToolExecutionSuccess",
    "ToolFailure",
)


@dataclass(frozen=True, slots=True)
class ToolErrorInfo:
    """Structured error identity: ``name`` (class name) and ``code``; ``reason`` is a detail."""

    name: str
    code: str
    reason: str | None = None

    def __reduce__(self) -> tuple[Any, ...]:  # positional: pickled per result on Ray
        return (ToolErrorInfo, (self.name, self.code, self.reason))

    def to_wire(self) -> dict[str, Any]:
        """``{"name", "code", "reason"?}``."""
        wire: dict[str, Any] = {"name": self.name, "code": self.code}
        if self.reason is not None:
            wire["reason"] = self.reason
        return wire


@dataclass(frozen=True, slots=True, init=False)
class ToolFailure:
    """A failure's message (without the ``Error:`` envelope), optional info, its fault class.

    ``fault`` (``"input"``, ``"policy"``, ``"tool"``, ``"infra"`` or ``"cancelled"``) says
    whom the failure blames; unless given, it follows ``info.code`` by
    :data:`toolray.FAULT_CLASSES` (no info, or a code the table does not list: ``"tool"``).
    Two failures compare by message and info.

    Example:
        >>> ToolFailure("worker died", ToolErrorInfo("ToolWorkerLostError", "WORKER_LOST")).fault
        'infra'
        >>> ToolFailure("boom").fault
        'tool'
    """

    message: str
    info: ToolErrorInfo | None
    fault: FaultClass = field(compare=False)

    def __init__(
        self, message: str, info: ToolErrorInfo | None = None, fault: FaultClass | None = None
    ) -> None:
        object.__setattr__(self, "message", message)
        object.__setattr__(self, "info", info)
        if fault is None:
            code = getattr(info, "code", None)
            fault = fault_of(code if isinstance(code, str) else None)
        object.__setattr__(self, "fault", check_fault(fault))

    def __reduce__(self) -> tuple[Any, ...]:
        return (ToolFailure, (self.message, self.info, self.fault))

    def to_wire(self) -> dict[str, Any]:
        """``{"message", "info"?}``: the durable record, as it always was (without ``fault``)."""
        wire: dict[str, Any] = {"message": self.message}
        if self.info is not None:
            wire["info"] = self.info.to_wire()
        return wire


def _wire(result: ToolExecutionSuccess | ToolExecutionFailure) -> dict[str, Any]:
    wire: dict[str, Any] = {"isError": result.is_error, "content": list(result.content)}
    if isinstance(result, ToolExecutionFailure):
        wire["error"] = result.error.to_wire()
    if result.meta is not None:
        wire["meta"] = result.meta
    return wire


@dataclass(frozen=True, slots=True)
class ToolExecutionSuccess:
    """A successful outcome: the canonical ``value`` plus its model-facing ``content``."""

    value: Any
    content: list[ContentBlock]
    meta: Any = None
    additional_contexts: tuple[UserMessage, ...] = ()
    concludes_turn: bool = False

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.value, self.content, self.meta, self.additional_contexts)
        return (ToolExecutionSuccess, (*fields, self.concludes_turn))

    @property
    def is_error(self) -> Literal[False]:
        """Always ``False``."""
        return False

    def to_wire(self) -> dict[str, Any]:
        """The durable camelCase projection (``isError``, ``content``, ``meta``); no value."""
        return _wire(self)


@dataclass(frozen=True, slots=True)
class ToolExecutionFailure:
    """A failed outcome: never carries a value."""

    error: ToolFailure
    content: list[ContentBlock]
    meta: Any = None
    additional_contexts: tuple[UserMessage, ...] = ()

    def __reduce__(self) -> tuple[Any, ...]:
        fields = (self.error, self.content, self.meta, self.additional_contexts)
        return (ToolExecutionFailure, fields)

    @property
    def is_error(self) -> Literal[True]:
        """Always ``True``."""
        return True

    @property
    def concludes_turn(self) -> Literal[False]:
        """A failure never concludes the turn."""
        return False

    def to_wire(self) -> dict[str, Any]:
        """The durable camelCase projection (``isError``, ``content``, ``error``, ``meta``)."""
        return _wire(self)


ToolExecutionResult: TypeAlias = ToolExecutionSuccess | ToolExecutionFailure
