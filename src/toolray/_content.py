"""Content blocks and the user messages that tools defer to the next step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias

__all__ = ("ContentBlock", "UserMessage", "text_block")

ContentBlock: TypeAlias = dict[str, Any]
"""A JSON content block: ``{"type": "text", "text": ...}`` or
``{"type": "image", "data": <base64>, "mimeType": ...}``."""


def text_block(text: str) -> ContentBlock:
    """Build a text content block.

    Example:
        >>> text_block("hi")
        {'type': 'text', 'text': 'hi'}
    """
    return {"type": "text", "text": text}


@dataclass(frozen=True, slots=True)
class UserMessage:
    """A user message carried by ``defer_context`` and ``additional_contexts``."""

    content: list[ContentBlock]
    source: str | None = None
    meta: Any = None

    def to_wire(self) -> dict[str, Any]:
        """The durable camelCase projection (``role``, ``content``, ``source``, ``meta``)."""
        wire: dict[str, Any] = {"role": "user", "content": list(self.content)}
        if self.source is not None:
            wire["source"] = self.source
        if self.meta is not None:
            wire["meta"] = self.meta
        return wire
