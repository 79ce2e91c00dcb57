"""Raw model arguments: what a :class:`ToolCall` carries, turned into an execution's input.

A model call's ``arguments`` is JSON text (OpenAI) or an already parsed mapping (Anthropic's
``tool_use.input``). :func:`parse_arguments` turns either into the value the pipeline
snapshots (P-ARGS-15). Anything else cannot be a call's arguments: it becomes an
:class:`InvalidArguments` marker, which the pipeline answers with that call's own
``INVALID_ARGS`` failure, so one malformed call never breaks its batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from ._json import FrozenDict, is_json
from .errors import ToolArgsError

__all__ = ("InvalidArguments", "args_error", "logged_arguments", "parse_arguments")


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class InvalidArguments:
    """Arguments that are neither JSON text nor a mapping; ``error`` is the call's failure."""

    error: Exception


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_arguments(arguments: Any) -> Any:
    """The value a call's raw ``arguments`` stand for (P-ARGS-15).

    Text: ``""`` → ``{}``; valid JSON → its value; invalid JSON → the raw string (``NaN``
    and ``Infinity`` are not JSON, although Python's parser would accept them). A mapping →
    a ``dict`` of its items, whose values the pipeline snapshots like parsed text (a
    non-JSON value gives the P-ARGS-4 failure). Anything else → :class:`InvalidArguments`.

    Example:
        >>> parse_arguments('{"a": 1}'), parse_arguments(""), parse_arguments("{oops")
        ({'a': 1}, {}, '{oops')
        >>> parse_arguments(42).error.code
        'INVALID_ARGS'
    """
    if isinstance(arguments, str):
        if arguments == "":
            return {}
        try:
            return json.loads(arguments, parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return arguments
    if isinstance(arguments, Mapping):
        if type(arguments) is dict or type(arguments) is FrozenDict:
            return arguments
        try:
            return dict(arguments.items())
        except Exception as exc:  # a hostile mapping: its own error is the call's failure
            return InvalidArguments(error=exc)
    kind = type(arguments).__name__
    violation = f"ToolCall.arguments must be a str (JSON text) or a Mapping, not {kind}"
    return InvalidArguments(error=ToolArgsError([violation]))


def logged_arguments(arguments: Any) -> str | None:
    """The ``arguments`` of a ``tool/call`` record: always JSON text, or ``None``.

    Text is logged as the model sent it; a mapping as its JSON text when it is lossless
    JSON; anything else as ``None`` (no text stands for it).
    """
    if isinstance(arguments, str):
        return arguments
    parsed = parse_arguments(arguments)
    if isinstance(parsed, InvalidArguments):
        return None
    try:
        if not is_json(parsed):
            return None
        return json.dumps(parsed, ensure_ascii=False, allow_nan=False)
    except Exception:  # a value whose inspection raises
        return None


NOT_AN_OBJECT = '"arguments" must be an object'


def args_error(arguments: Any, violations: list[str]) -> ToolArgsError:
    """The ``INVALID_ARGS`` error of a typed tool's ``violations``.

    Arguments the model sent as malformed JSON reach the tool as their raw text
    (P-ARGS-15); "must be an object" alone would hide why, so when that text is a broken
    object or array (it starts with ``{`` or ``[``) the error says it is not valid JSON and
    where the parser stopped. Other text keeps the plain message: a string that does not
    start that way may as well be a JSON string the model sent, parsed already.

    Example:
        >>> args_error('{"a": }', [NOT_AN_OBJECT]).violations
        ('"arguments" is not valid JSON: Expecting value at line 1, column 7 (char 6)',)
    """
    broken = isinstance(arguments, str) and arguments.lstrip().startswith(("{", "["))
    if broken and violations == [NOT_AN_OBJECT]:
        try:
            json.loads(arguments)
        except json.JSONDecodeError as err:
            where = f"line {err.lineno}, column {err.colno} (char {err.pos})"
            return ToolArgsError([f'"arguments" is not valid JSON: {err.msg} at {where}'])
    return ToolArgsError(violations)
