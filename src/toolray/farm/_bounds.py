"""Result bounds: the size of a value as JSON text, and long text blocks cut short.

``max_result_bytes`` bounds the UTF-8 bytes of a value's compact JSON text; it is checked
where the body ran (in-process after the body, on Ray in the worker or its call process),
so an oversized value never travels. ``max_content_chars`` cuts each longer text block of a
result's content, keeping its start, and appends ``[… <n> characters truncated]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolray.errors import ResultTooLargeError

__all__ = (
    "DEFAULT_MAX_RESULT_BYTES",
    "check_bound",
    "json_size",
    "oversized",
    "truncate_blocks",
    "truncation_marker",
)

DEFAULT_MAX_RESULT_BYTES = 1 << 20
"""The default bound of a result's JSON text: 1 MiB."""


def check_bound(owner: str, field: str, value: object) -> None:
    """``value`` must be ``None`` or a positive integer (a size or a character count)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {field} must be None or a positive integer, not {value!r}")


def json_size(value: Any, limit: int) -> int | None:
    """The UTF-8 size of ``value``'s compact JSON text, or ``None`` if it is not JSON.

    A string already longer than ``limit`` characters is not encoded: its size is
    reported as its length (every character is at least one byte, so it is over).
    """
    if isinstance(value, str) and len(value) > limit:
        return len(value) + 2
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None  # not JSON: the executor's own check fails it
    return len(text.encode("utf-8", "surrogatepass"))


def oversized(tool: str, value: Any, limit: int | None) -> ResultTooLargeError | None:
    """The failure of a value over ``limit`` bytes of JSON text, else ``None``."""
    if limit is None:
        return None
    size = json_size(value, limit)
    if size is None or size <= limit:
        return None
    return ResultTooLargeError(
        f'tool "{tool}" returned a value larger than max_result_bytes ({limit} bytes of JSON)'
    )


def truncation_marker(cut: int) -> str:
    """What follows the kept start of a cut text block."""
    return f"[… {cut} characters truncated]"


def truncate_blocks(blocks: Sequence[Any], max_chars: int) -> list[Any] | None:
    """``blocks`` with every longer text cut to ``max_chars``; ``None`` if none was longer."""
    out: list[Any] = []
    changed = False
    for block in blocks:
        text = block.get("text") if isinstance(block, dict) else None
        if block_is_text(block) and isinstance(text, str) and len(text) > max_chars:
            cut = len(text) - max_chars
            block = {**block, "text": text[:max_chars] + truncation_marker(cut)}
            changed = True
        out.append(block)
    return out if changed else None


def block_is_text(block: Any) -> bool:
    """Whether ``block`` is a text content block."""
    return isinstance(block, dict) and block.get("type") == "text"
