"""Outcomes and policy decisions: frozen values that cross every stage (and processes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ._content import ContentBlock, UserMessage
from ._signals import AbortSignal

__all__ = (
    "Accept",
    "ActivationContext",
    "Allow",
    "ApprovalOutcome",
    "ApprovalRequest",
    "ApprovalService",
    "Ask",
    "Block",
    "Cancel",
    "Deny",
    "ModelSelection",
    "PostToolDecision",
    "PreToolDecision",
    "ReplaceValue",
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

    def to_wire(self) -> dict[str, Any]:
        """``{"name", "code", "reason"?}``."""
        wire: dict[str, Any] = {"name": self.name, "code": self.code}
        if self.reason is not None:
            wire["reason"] = self.reason
        return wire


@dataclass(frozen=True, slots=True)
class ToolFailure:
    """A failure's message (without the ``Error:`` envelope) and optional info."""

    message: str
    info: ToolErrorInfo | None = None

    def to_wire(self) -> dict[str, Any]:
        """``{"message", "info"?}``."""
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


# ---------------------------------------------------------------- pre-execute decisions
@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call."""


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse the call with a model-facing ``reason`` (and optional structured info)."""

    reason: str
    info: ToolErrorInfo | None = None


@dataclass(frozen=True, slots=True)
class Cancel:
    """Select the canonical pre-dispatch cancellation result (no policy denial text)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """Ask the approval service; only ``allowed-once`` runs the call."""

    reason: str | None = None
    display_reason: Any = None


PreToolDecision: TypeAlias = Allow | Deny | Cancel | Ask


# ---------------------------------------------------------------- post-execute decisions
@dataclass(frozen=True, slots=True)
class Accept:
    """Accept the result, optionally replacing its content and attaching contexts."""

    content: list[ContentBlock] | None = None
    additional_contexts: tuple[UserMessage, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplaceValue:
    """Replace a success's value (re-validated, content and meta recomputed)."""

    value: Any
    additional_contexts: tuple[UserMessage, ...] = ()


@dataclass(frozen=True, slots=True)
class Block:
    """Turn the result into a valueless failure whose content is ``feedback``."""

    feedback: list[ContentBlock]
    additional_contexts: tuple[UserMessage, ...] = ()


PostToolDecision: TypeAlias = Accept | ReplaceValue | Block


# ---------------------------------------------------------------- approval and activation
ApprovalOutcome: TypeAlias = Literal["allowed-once", "rejected", "cancelled", "unavailable"]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approval service is asked (``signal`` is the caller's own signal)."""

    scope: str
    tool_name: str
    call_id: str
    reason: str | None
    signal: AbortSignal
    display_reason: Any = None


@runtime_checkable
class ApprovalService(Protocol):
    """Answers ``Ask`` decisions."""

    async def request(self, request: ApprovalRequest) -> ApprovalOutcome:
        """Return the user's answer."""
        ...


@dataclass(frozen=True, slots=True)
class ModelSelection:
    """The model captured for a step."""

    provider: str
    model: str
    reasoning_effort: str | None = None


@dataclass(frozen=True, slots=True)
class ActivationContext:
    """What a ``when`` condition sees: the scope, the step's model, and its signal."""

    scope: str | None
    model: ModelSelection
    signal: AbortSignal
