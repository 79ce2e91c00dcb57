"""Approval: the service that answers ``Ask`` decisions, and what it is asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from ._signals import AbortSignal

__all__ = ("ApprovalOutcome", "ApprovalRequest", "ApprovalService")

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
