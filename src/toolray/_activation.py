"""Activation: what a conditional registration's ``when`` sees at ``resolve()`` time."""

from __future__ import annotations

from dataclasses import dataclass

from ._signals import AbortSignal

__all__ = ("ActivationContext", "ModelSelection")


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
