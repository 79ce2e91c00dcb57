"""Policy decisions: what pre-execute listeners and post-execute listeners answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

from ._content import ContentBlock, UserMessage
from ._outcomes import ToolErrorInfo

__all__ = (
    "Accept",
    "Allow",
    "Ask",
    "Block",
    "Cancel",
    "Deny",
    "PostToolDecision",
    "PreToolDecision",
    "ReplaceValue",
)


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
