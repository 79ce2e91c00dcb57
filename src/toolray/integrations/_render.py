"""A settled call as a framework shows it to the model: text (failures marked) and images.

The text is what the provider adapters send: the result's text blocks joined by newlines,
a failure always reading ``Error: …``. Images are toolray image blocks (base64 ``data`` and
``mimeType``), which each framework turns into its own image content.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolray import ToolBatchResult, ToolCallResult, ToolExecutionSuccess
from toolray.adapters._common import Outcome, image_parts, marked_text
from toolray.lowlevel import thaw_json

__all__ = ("Image", "Rendered", "render", "render_all")


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """An image a tool returned: base64 ``data`` of ``mime_type``."""

    mime_type: str
    data: str

    @property
    def data_url(self) -> str:
        """``data:<mime>;base64,<data>``."""
        return f"data:{self.mime_type};base64,{self.data}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Rendered:
    """One call's result for the model: its text, its images, whether it failed.

    ``value`` is a success's canonical value as plain JSON (``None`` for a failure).
    """

    call_id: str
    text: str
    images: tuple[Image, ...]
    is_error: bool
    value: Any = None


def render(item: ToolCallResult) -> Rendered:
    """The model's view of one settled call."""
    result = item.result
    texts: list[str] = []
    images: list[Image] = []
    for is_image, part in image_parts(result.content):
        if is_image:
            images.append(_image(part))
        else:
            texts.append(part)
    outcome = Outcome(item.call_id, bool(result.is_error), list(result.content))
    value = thaw_json(result.value) if isinstance(result, ToolExecutionSuccess) else None
    return Rendered(
        call_id=item.call_id,
        text=marked_text(outcome, texts),
        images=tuple(images),
        is_error=outcome.is_error,
        value=value,
    )


def render_all(batch: ToolBatchResult) -> list[Rendered]:
    """Every call of a batch, in model order."""
    return [render(item) for item in batch.results]


def _image(block: Mapping[str, Any]) -> Image:
    return Image(mime_type=str(block["mimeType"]), data=str(block["data"]))
