"""Anthropic in and out: the Messages API (``pip install "toolray[anthropic]"``).

- :func:`calls_from_anthropic` reads the ``tool_use`` blocks of an assistant ``Message`` (or
  of its ``content`` list); text, thinking and server-tool blocks are skipped.
- :func:`tools_for_anthropic` lists a registry scope's tools as ``{"name", "description",
  "input_schema"}``.
- :func:`results_to_anthropic` turns a batch result into the one ``user`` message that
  answers them: a ``tool_result`` block per call, in call order, with ``is_error`` and text
  and image content, then the contexts the tools deferred as further blocks.

The Anthropic SDK is needed only for its types: the functions return plain dicts, which the
SDK takes as ``messages=``/``tools=`` values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from toolray import ToolCall

from ._common import as_data, contexts_of, image_parts, outcomes, require_str, schema_list

__all__ = ("calls_from_anthropic", "results_to_anthropic", "tools_for_anthropic")

_IMAGE_TYPES: Final = frozenset(("image/jpeg", "image/png", "image/gif", "image/webp"))


def calls_from_anthropic(obj: Any) -> list[ToolCall]:
    """The ``tool_use`` blocks of one assistant turn, in model order.

    Args:
        obj: an ``anthropic.types.Message`` or its ``content`` list (SDK objects or dicts),
            or one ``tool_use`` block.

    Returns:
        One ``ToolCall`` per ``tool_use`` block; ``arguments`` is the JSON text of the
        block's ``input`` object.

    Raises:
        TypeError: ``obj`` is not a message, a content list or a block; or an ``input`` is
            not an object.
        ValueError: a ``tool_use`` block lacks its ``id`` or ``name``.

    Example:
        >>> calls_from_anthropic([{"type": "text", "text": "Adding."},
        ...     {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 1}}])
        [ToolCall(id='toolu_1', name='add', arguments='{"a": 1}')]
    """
    where = "calls_from_anthropic"
    data = as_data(obj, where)
    if isinstance(data, Mapping) and "content" in data:
        data = data["content"]
    elif isinstance(data, Mapping) and "type" in data:
        data = [data]
    if isinstance(data, str):
        return []  # a message whose content is plain text has no tool calls
    if not isinstance(data, list | tuple):
        raise TypeError(
            f"{where}: expected a Message, its content list or a tool_use block,"
            f" not {type(obj).__name__}"
        )
    calls = []
    for index, raw in enumerate(data):
        block = as_data(raw, where)
        if not isinstance(block, Mapping):
            raise TypeError(
                f"{where}: content[{index}] must be a block, not {type(block).__name__}"
            )
        if block.get("type") == "tool_use":
            calls.append(_call(block, f"{where}: content[{index}]"))
    return calls


def _call(block: Mapping[str, Any], where: str) -> ToolCall:
    arguments = block.get("input")
    if not isinstance(arguments, Mapping):
        raise TypeError(f"{where}: input must be an object, not {type(arguments).__name__}")
    # ToolCall.arguments is the model's JSON text today; once the core takes a Mapping as
    # well, the dict can be passed on as it is.
    return ToolCall(
        require_str(block, "id", where),
        require_str(block, "name", where),
        json.dumps(dict(arguments)),
    )


def tools_for_anthropic(registry: Any, scope: str | None = None) -> list[dict[str, Any]]:
    """The tools ``scope`` sees, as Anthropic tool definitions.

    Args:
        registry: a ``ToolRegistry`` (or the Ray ``RemoteRegistry``): anything with
            ``schemas(scope)``.
        scope: the agent scope whose view to list (``None``: the global context).

    Returns:
        ``{"name", "description", "input_schema"}`` per tool (no ``description`` key when
        the tool has none).

    Example:
        >>> from toolray import ToolRegistry, ToolOutput, define_tool, text_block
        >>> reg = ToolRegistry()
        >>> _ = reg.register(define_tool(
        ...     name="echo", description="Echo text",
        ...     parameters={"text": {"type": "string", "required": True}},
        ...     output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        ...     execute=lambda args, ctx: args["text"],
        ... ))
        >>> tools_for_anthropic(reg)[0]["input_schema"]["required"]
        ['text']
    """
    tools = []
    for schema in schema_list(registry, scope, "tools_for_anthropic"):
        tool: dict[str, Any] = {"name": schema["name"]}
        if schema.get("description"):
            tool["description"] = schema["description"]
        tool["input_schema"] = schema["parameters"]
        tools.append(tool)
    return tools


def results_to_anthropic(batch_result: Any) -> dict[str, Any]:
    """The ``user`` message that answers a batch: ``tool_result`` blocks in call order.

    Each block has ``tool_use_id``, ``is_error`` and the result's content as ``text`` and
    ``image`` blocks (an image of a type the API does not take becomes a text note); blocks
    for the contexts the tools deferred follow the tool results, as the API requires.

    Raises:
        TypeError: ``batch_result`` is not a batch result.

    Example:
        >>> from toolray import ToolCallResult, ToolExecutionSuccess, text_block
        >>> done = ToolCallResult("toolu_1", ToolExecutionSuccess(3, [text_block("3")]))
        >>> results_to_anthropic([done])["content"][0]
        {'type': 'tool_result', 'tool_use_id': 'toolu_1', 'is_error': False, \
'content': [{'type': 'text', 'text': '3'}]}
    """
    content: list[dict[str, Any]] = []
    for outcome in outcomes(batch_result, "results_to_anthropic"):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": outcome.call_id,
            "is_error": outcome.is_error,
        }
        parts = _blocks(outcome.content)
        if parts:
            block["content"] = parts
        content.append(block)
    for context in contexts_of(batch_result):
        content.extend(_blocks(context.content))
    return {"role": "user", "content": content}


def _blocks(blocks: list[Any]) -> list[dict[str, Any]]:
    out = []
    for is_image, part in image_parts(blocks):
        if not is_image:
            out.append({"type": "text", "text": part})
        elif part["mimeType"] in _IMAGE_TYPES:
            source = {"type": "base64", "media_type": part["mimeType"], "data": part["data"]}
            out.append({"type": "image", "source": source})
        else:
            out.append({"type": "text", "text": f"[{part['mimeType']} image: type not supported]"})
    return out
