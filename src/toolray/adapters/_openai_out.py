"""How a batch's results read in the OpenAI APIs (the output side of ``results_to_openai``).

Neither API has an error flag on a tool result, so a failure is text starting with
``Error:``. The Responses API takes images inside a ``function_call_output``; a Chat
``tool`` message is text only, so its images go in one ``user`` message after the tool
messages, and each tool message points there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._common import Outcome, image_parts, marked_text

__all__ = ("chat_messages", "function_output", "user_message")


def chat_messages(settled: list[Outcome]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    images: list[dict[str, Any]] = []
    for outcome in settled:
        texts = []
        for is_image, part in image_parts(outcome.content):
            if is_image:
                images.append(_text_part(f"Image returned by tool call {outcome.call_id}:"))
                images.append(_chat_image(part))
                texts.append("[image: in the user message after the tool results]")
            else:
                texts.append(part)
        content = marked_text(outcome, texts)
        messages.append({"role": "tool", "tool_call_id": outcome.call_id, "content": content})
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def function_output(outcome: Outcome) -> dict[str, Any]:
    parts = list(image_parts(outcome.content))
    output: str | list[dict[str, Any]]
    if any(is_image for is_image, _ in parts):
        texts = [part for is_image, part in parts if not is_image]
        output = [_text_part(marked_text(outcome, texts), "input_text")] if texts else []
        output += [_responses_image(part) for is_image, part in parts if is_image]
    else:
        output = marked_text(outcome, [part for _, part in parts])
    return {"type": "function_call_output", "call_id": outcome.call_id, "output": output}


def user_message(blocks: list[Any], api: str) -> dict[str, Any]:
    text_type = "input_text" if api == "responses" else "text"
    image = _responses_image if api == "responses" else _chat_image
    content = [
        image(part) if is_image else _text_part(part, text_type)
        for is_image, part in image_parts(blocks)
    ]
    return {"role": "user", "content": content}


def _text_part(text: str, kind: str = "text") -> dict[str, Any]:
    return {"type": kind, "text": text}


def _data_url(block: Mapping[str, Any]) -> str:
    return f"data:{block['mimeType']};base64,{block['data']}"


def _chat_image(block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": _data_url(block)}}


def _responses_image(block: Mapping[str, Any]) -> dict[str, Any]:
    return {"type": "input_image", "image_url": _data_url(block), "detail": "auto"}
