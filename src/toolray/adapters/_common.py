"""What the provider adapters share: reading provider objects, walking results, blocks.

Provider SDK objects are pydantic models; the adapters read them through their JSON dump,
so an SDK object and the plain dict a user logged or received over HTTP go through the same
code. Every shape problem is a ``TypeError`` (wrong kind of value) or ``ValueError`` (a
missing or malformed field) whose message names the adapter function and the place.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from toolray import ContentBlock, ToolBatchResult, ToolCallResult, ToolExecutionResult, UserMessage

__all__ = (
    "Outcome",
    "arguments_text",
    "as_data",
    "block_text",
    "contexts_of",
    "image_parts",
    "marked_text",
    "outcomes",
    "require_str",
    "schema_list",
)


def as_data(obj: Any, where: str) -> Any:
    """A plain JSON-like view of ``obj``: pydantic models dumped by alias, others as given."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json", by_alias=True)
        except Exception as err:
            raise TypeError(f"{where}: cannot read {type(obj).__name__}: {err}") from None
    return obj


def require_str(data: Mapping[str, Any], key: str, where: str) -> str:
    """``data[key]`` as a non-empty ``str``, or a ``ValueError`` naming the place."""
    value = data.get(key)
    if not isinstance(value, str) or not value:
        found = "missing" if value is None else f"{type(value).__name__} {value!r}"
        raise ValueError(f'{where}: "{key}" must be a non-empty string ({found})')
    return value


def arguments_text(value: Any, where: str) -> str:
    """The model's argument text: kept as given, or JSON text for a mapping."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return json.dumps(dict(value))
    raise TypeError(
        f"{where}: arguments must be JSON text or an object, not {type(value).__name__}"
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """One settled call as the adapters render it."""

    call_id: str
    is_error: bool
    content: list[ContentBlock]


def outcomes(batch_result: Any, where: str) -> list[Outcome]:
    """The settled calls of a ``ToolBatchResult`` (or a sequence of ``ToolCallResult``)."""
    items = _call_results(batch_result, where)
    out = []
    for index, item in enumerate(items):
        if not isinstance(item, ToolCallResult):
            raise TypeError(
                f"{where}: results[{index}] is {type(item).__name__}, not ToolCallResult"
            )
        result: ToolExecutionResult = item.result
        out.append(Outcome(item.call_id, bool(result.is_error), list(result.content)))
    return out


def contexts_of(batch_result: Any) -> list[UserMessage]:
    """The contexts the batch defers to the next request, in call order."""
    if isinstance(batch_result, ToolBatchResult):
        return list(batch_result.additional_contexts)
    return [
        message
        for item in batch_result
        if isinstance(item, ToolCallResult)
        for message in item.result.additional_contexts
    ]


def _call_results(batch_result: Any, where: str) -> Sequence[Any]:
    if isinstance(batch_result, ToolBatchResult):
        return batch_result.results
    if isinstance(batch_result, Sequence) and not isinstance(batch_result, str | bytes):
        return batch_result
    raise TypeError(
        f"{where}: expected a ToolBatchResult or a sequence of ToolCallResult,"
        f" not {type(batch_result).__name__}"
    )


def block_text(block: Any) -> str:
    """The text a model reads for a block that is not an image."""
    if isinstance(block, Mapping) and block.get("type") == "text":
        return str(block.get("text", ""))
    return json.dumps(block, default=str)


def is_image(block: Any) -> bool:
    """A toolray image block: ``{"type": "image", "data": <base64>, "mimeType": ...}``."""
    return (
        isinstance(block, Mapping)
        and block.get("type") == "image"
        and isinstance(block.get("data"), str)
        and isinstance(block.get("mimeType"), str)
    )


def image_parts(blocks: Iterable[Any]) -> Iterator[tuple[bool, Any]]:
    """``(True, image block)`` or ``(False, text)`` per block, skipping empty text."""
    for block in blocks:
        if is_image(block):
            yield True, block
        else:
            text = block_text(block)
            if text:
                yield False, text


def marked_text(outcome: Outcome, texts: Sequence[str]) -> str:
    """The joined text of a result; a failure always reads as an error to the model.

    Failures made by the pipeline already start with ``Error:``; a failure whose content a
    hook replaced gets the prefix, because neither OpenAI API has an error flag.
    """
    text = "\n".join(texts)
    if outcome.is_error and not text.startswith("Error"):
        return f"Error: {text}" if text else "Error"
    return text


def schema_list(registry: Any, scope: str | None, where: str) -> list[dict[str, Any]]:
    """``registry.schemas(scope)`` (a ``ToolRegistry`` or the Ray ``RemoteRegistry``)."""
    schemas = getattr(registry, "schemas", None)
    if not callable(schemas):
        raise TypeError(
            f"{where}: expected a registry with schemas(scope), not {type(registry).__name__}"
        )
    return list(schemas(scope))
