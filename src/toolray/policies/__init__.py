"""Policies that plug into the registry's hooks."""

from __future__ import annotations

from ._timeout import TimeoutPolicy as TimeoutPolicy

__all__ = ("TimeoutPolicy",)
