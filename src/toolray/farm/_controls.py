"""``FarmControls``: what one registry enforces for every call it runs.

A registry holds one: its rate limiter (in-process a :class:`LocalRateLimiter`; a runtime
such as the Ray layer supplies its own) and the default result bounds, which a definition's
own ``max_result_bytes`` / ``max_content_chars`` override.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._bounds import DEFAULT_MAX_RESULT_BYTES
from ._limiter import RateLimiter

__all__ = ("FarmControls",)


@dataclass(frozen=True, slots=True, kw_only=True)
class FarmControls:
    """A registry's rate limiter and default result bounds (``None``: unbounded)."""

    rate_limiter: RateLimiter
    max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES
    max_content_chars: int | None = None

    def result_bytes(self, definition: Any) -> int | None:
        """The bound of ``definition``'s values: its own, else the registry's."""
        own = getattr(definition, "max_result_bytes", None)
        return own if own is not None else self.max_result_bytes

    def content_chars(self, definition: Any) -> int | None:
        """The text-block bound of ``definition``'s results: its own, else the registry's."""
        own = getattr(definition, "max_content_chars", None)
        return own if own is not None else self.max_content_chars
