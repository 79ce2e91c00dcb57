"""OpenAI in and out: Chat Completions and the Responses API (``pip install "toolray[openai]"``).

- :func:`calls_from_openai` reads the function calls of a model turn: a Chat Completions
  ``ChatCompletion`` or its message (or the message's ``tool_calls``), a Responses API
  ``Response`` or its ``output`` items (``function_call`` items; messages, reasoning and
  hosted-tool items are skipped). SDK objects and plain dicts alike.
- :func:`tools_for_openai` lists a registry scope's tools in the chosen API's format, with
  ``strict`` where the schema allows it.
- :func:`results_to_openai` turns a batch result into ``tool`` messages (Chat) or
  ``function_call_output`` items (Responses), in call order.

Neither API has an error flag on a tool result, so a failure reads as text starting with
``Error:`` (the pipeline's failure text already does). The Responses API takes images in a
function output (``input_image``); a Chat ``tool`` message is text only, so images go in one
``user`` message after the tool messages, and the tool message points to it. Contexts the
tools deferred (``ctx.defer_context``) follow as ``user`` messages.

The OpenAI SDK is needed only for its types: the functions return plain dicts, which the SDK
takes as ``messages=``/``input=``/``tools=`` values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from toolray import ToolCall

from ._common import arguments_text, as_data, contexts_of, outcomes, require_str, schema_list
from ._openai_out import chat_messages, function_output, user_message
from ._strict import strict_parameters

__all__ = ("calls_from_openai", "results_to_openai", "tools_for_openai")

OpenAIApi = Literal["chat", "responses"]
_CUSTOM_CALLS = ("custom", "custom_tool_call")


def calls_from_openai(obj: Any) -> list[ToolCall]:
    """The function calls of one OpenAI model turn, in model order.

    Args:
        obj: a ``ChatCompletion`` (one choice), a ``ChatCompletionMessage`` or its
            ``tool_calls`` list; a ``Response`` or its ``output`` list, or one
            ``function_call`` item. SDK objects or plain dicts.

    Returns:
        One ``ToolCall`` per function call (``id`` is the chat call id or the Responses
        ``call_id``; ``arguments`` is the model's JSON text, passed on unparsed).

    Raises:
        TypeError: ``obj`` (or an item) is not one of those shapes.
        ValueError: a call lacks its id or name, or is a custom (free-form) tool call,
            which no toolray tool can answer.

    Example:
        >>> message = {"role": "assistant", "content": None, "tool_calls": [
        ...     {"id": "call_1", "type": "function",
        ...      "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}
        >>> calls_from_openai(message)
        [ToolCall(id='call_1', name='add', arguments='{"a": 1, "b": 2}')]
    """
    where = "calls_from_openai"
    items = _items(as_data(obj, where), where)
    calls = []
    for index, raw in enumerate(items):
        call = _call(as_data(raw, where), f"{where}: item {index}")
        if call is not None:
            calls.append(call)
    return calls


def _items(data: Any, where: str) -> list[Any]:
    if isinstance(data, list | tuple):
        return list(data)
    if not isinstance(data, Mapping):
        raise TypeError(
            f"{where}: expected a Chat Completions message or tool_calls list, or a Responses"
            f" API response or output list, not {type(data).__name__}"
        )
    if "choices" in data:
        return _items(_only_message(data["choices"], where), where)
    if "tool_calls" in data or data.get("role") == "assistant":
        return _listed(data.get("tool_calls"), "tool_calls", where)
    if "output" in data and data.get("type") is None:
        return _listed(data["output"], "output", where)
    if "type" in data:
        return [data]
    raise ValueError(
        f"{where}: a mapping with keys {sorted(data)} is neither a Chat Completions message"
        " (tool_calls), a Responses API response (output) nor an output item (type)"
    )


def _only_message(choices: Any, where: str) -> Any:
    if not isinstance(choices, list) or len(choices) != 1:
        raise ValueError(f"{where}: a ChatCompletion needs exactly one choice; pass its message")
    choice = choices[0]
    if not isinstance(choice, Mapping) or not isinstance(choice.get("message"), Mapping):
        raise ValueError(f"{where}: choices[0] has no message")
    return choice["message"]


def _listed(value: Any, key: str, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise TypeError(f"{where}: {key} must be a list, not {type(value).__name__}")
    return list(value)


def _call(item: Any, where: str) -> ToolCall | None:
    if not isinstance(item, Mapping):
        raise TypeError(f"{where} must be an object, not {type(item).__name__}")
    kind = item.get("type")
    if kind == "function_call":
        return ToolCall(
            require_str(item, "call_id", where),
            require_str(item, "name", where),
            arguments_text(item.get("arguments"), where),
        )
    if kind in ("function", None) and "function" in item:
        function = item["function"]
        if not isinstance(function, Mapping):
            raise TypeError(f"{where}: function must be an object")
        return ToolCall(
            require_str(item, "id", where),
            require_str(function, "name", f"{where}.function"),
            arguments_text(function.get("arguments"), f"{where}.function"),
        )
    if kind in _CUSTOM_CALLS:
        raise ValueError(f"{where} is a custom tool call ({kind}); toolray runs function tools")
    if not isinstance(kind, str):
        raise ValueError(f"{where} has no type: not a tool call or an output item")
    return None  # a message, reasoning or hosted-tool item: nothing for toolray to run


def tools_for_openai(
    registry: Any,
    scope: str | None = None,
    *,
    api: OpenAIApi = "chat",
    strict: bool | None = None,
) -> list[dict[str, Any]]:
    """The tools ``scope`` sees, as OpenAI function tools.

    Args:
        registry: a ``ToolRegistry`` (or the Ray ``RemoteRegistry``): anything with
            ``schemas(scope)``.
        scope: the agent scope whose view to list (``None``: the global context).
        api: ``"chat"`` (``{"type": "function", "function": {...}}``) or ``"responses"``
            (``{"type": "function", "name": ...}``).
        strict: ``None`` sets ``strict`` per tool, true where the schema allows it: every
            object lists all its properties as required and is closed (the parameters' root
            is closed for the model here; toolray roots are open only by convention), and
            every value has a type (``oneOf`` is sent as ``anyOf``). ``True`` forces it
            (``ValueError`` naming the first obstacle), ``False`` never sets it.

    Raises:
        ValueError: an unknown ``api``, or ``strict=True`` for a schema that cannot be strict.

    Example:
        >>> from toolray import ToolRegistry, ToolOutput, define_tool, text_block
        >>> reg = ToolRegistry()
        >>> _ = reg.register(define_tool(
        ...     name="echo", description="Echo text",
        ...     parameters={"text": {"type": "string", "required": True}},
        ...     output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        ...     execute=lambda args, ctx: args["text"],
        ... ))
        >>> tools_for_openai(reg, api="responses")[0]["strict"]
        True
    """
    where = "tools_for_openai"
    _check_api(api, where)
    if strict is not None and not isinstance(strict, bool):
        raise TypeError(f"{where}: strict must be True, False or None")
    return [_tool(schema, api, strict) for schema in schema_list(registry, scope, where)]


def _tool(schema: Mapping[str, Any], api: OpenAIApi, strict: bool | None) -> dict[str, Any]:
    name = schema["name"]
    parameters = schema["parameters"]
    is_strict = False
    if strict is not False:
        strict_schema, obstacle = strict_parameters(parameters)
        if strict_schema is not None:
            parameters, is_strict = strict_schema, True
        elif strict:
            raise ValueError(f'tools_for_openai: tool "{name}" cannot be strict: {obstacle}')
    function: dict[str, Any] = {"name": name}
    if schema.get("description"):
        function["description"] = schema["description"]
    function["parameters"] = parameters
    function["strict"] = is_strict
    if api == "responses":
        return {"type": "function", **function}
    return {"type": "function", "function": function}


def results_to_openai(batch_result: Any, *, api: OpenAIApi = "chat") -> list[dict[str, Any]]:
    """The next request's input items for a batch's results, in call order.

    Args:
        batch_result: a ``ToolBatchResult`` (or a sequence of ``ToolCallResult``).
        api: ``"chat"``: one ``{"role": "tool", "tool_call_id", "content"}`` message per
            call, then (if any) one ``user`` message with the results' images, then the
            deferred contexts as ``user`` messages. ``"responses"``: one
            ``{"type": "function_call_output", "call_id", "output"}`` item per call (``output``
            is text, or a list with ``input_text``/``input_image`` parts when there are
            images), then the deferred contexts as ``user`` messages.

    Raises:
        TypeError: ``batch_result`` is not a batch result.
        ValueError: an unknown ``api``.

    Example:
        >>> from toolray import ToolCallResult, ToolExecutionSuccess, text_block
        >>> done = ToolCallResult("call_1", ToolExecutionSuccess(3, [text_block("3")]))
        >>> results_to_openai([done])
        [{'role': 'tool', 'tool_call_id': 'call_1', 'content': '3'}]
    """
    where = "results_to_openai"
    _check_api(api, where)
    settled = outcomes(batch_result, where)
    if api == "responses":
        items = [function_output(outcome) for outcome in settled]
    else:
        items = chat_messages(settled)
    for context in contexts_of(batch_result):
        items.append(user_message(context.content, api))
    return items


def _check_api(api: Any, where: str) -> None:
    if api not in ("chat", "responses"):
        raise ValueError(f'{where}: api must be "chat" or "responses", not {api!r}')
