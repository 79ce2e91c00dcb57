"""Building results: failures from exceptions, the success path, and materialization.

Every function here returns a result; none raises for a tool's or a listener's fault.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeGuard

from ._content import UserMessage, text_block
from ._faults import FaultClass
from ._json import FrozenDict, FrozenList, snapshot_json
from ._outcomes import (
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionResult,
    ToolExecutionSuccess,
    ToolFailure,
)
from ._signals import AbortSignal, DeadlineReason
from .errors import (
    TOOL_ABORTED,
    TOOL_ABORTED_BEFORE_DISPATCH,
    AbortError,
    DeadlineExceededError,
    HarnessError,
    NotJsonError,
    ToolNotFoundError,
    ToolOutputError,
)

__all__ = (
    "NOT_LOSSLESS",
    "aborted",
    "block_message",
    "fail",
    "failure_from",
    "materialize",
    "message_of",
    "normalize_value",
    "past_deadline",
    "unknown_tool",
)

NOT_LOSSLESS = "tool result must be losslessly JSON-serializable"
UNPRINTABLE = "<unprintable thrown value>"


def message_of(exc: BaseException) -> str:
    """The model-facing message of a raised value (P-ERR-3)."""
    try:
        if isinstance(exc, HarnessError):
            return str(exc.message)
        message = getattr(exc, "message", None)
        if isinstance(message, str):
            return message
        return str(exc)
    except Exception:
        return UNPRINTABLE


def fail(
    message: str,
    info: ToolErrorInfo | None = None,
    contexts: Sequence[UserMessage] = (),
    *,
    fault: FaultClass | None = None,
) -> ToolExecutionFailure:
    """A failure whose content is exactly one ``Error: <message>`` text block (P-ERR-1).

    ``fault`` defaults to the class of ``info``'s code (see :mod:`toolray._faults`).
    """
    return ToolExecutionFailure(
        error=ToolFailure(message, info, fault),
        content=snapshot_json([text_block(f"Error: {message}")]),
        additional_contexts=tuple(contexts),
    )


def failure_from(
    exc: BaseException, contexts: Sequence[UserMessage] = (), *, fault: FaultClass | None = None
) -> ToolExecutionFailure:
    """A failure from a raised value; ``info`` only for ``HarnessError`` (P-ERR-2)."""
    info = None
    if isinstance(exc, HarnessError):
        reason = getattr(exc, "reason", None)
        info = ToolErrorInfo(exc.name, exc.code, reason if isinstance(reason, str) else None)
    return fail(message_of(exc), info, contexts, fault=fault)


def aborted(body_invoked: bool, contexts: Sequence[UserMessage] = ()) -> ToolExecutionFailure:
    """``ABORTED`` when the body ran, else ``ABORTED_BEFORE_DISPATCH`` (P-CANCEL-2/3)."""
    if body_invoked:
        return failure_from(AbortError("tool call aborted", TOOL_ABORTED), contexts)
    return failure_from(
        AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH), contexts
    )


def past_deadline(result: ToolExecutionResult, signal: AbortSignal) -> ToolExecutionResult:
    """``DEADLINE_EXCEEDED`` for a call aborted because its batch's deadline passed.

    ``signal`` is the call's: when it fired for a :class:`DeadlineReason` first, an
    ``ABORTED`` / ``ABORTED_BEFORE_DISPATCH`` outcome becomes ``DEADLINE_EXCEEDED`` (its
    ``info.reason`` kept: what the ladder terminated); anything else stands.
    """
    if not signal.aborted or not isinstance(result, ToolExecutionFailure):
        return result
    reason, info = signal.reason, result.error.info
    if not isinstance(reason, DeadlineReason) or info is None:
        return result
    if info.code == TOOL_ABORTED:
        err = DeadlineExceededError(f"tool call stopped: {reason}")
    elif info.code == TOOL_ABORTED_BEFORE_DISPATCH:
        err = DeadlineExceededError(f"tool call not started: {reason}")
    else:
        return result
    err.reason = info.reason
    return failure_from(err, result.additional_contexts)


def unknown_tool(name: str, message: str | None = None) -> ToolExecutionFailure:
    """``UNKNOWN_TOOL`` for a name the caller cannot execute."""
    return failure_from(ToolNotFoundError(name, message))


def normalize_value(
    *,
    name: str,
    value: Any,
    arguments: Any,
    output: Any,
    check: Callable[[Any], list[str]],
    top_level: bool,
    contexts: Sequence[UserMessage] = (),
    concludes_turn: bool = False,
) -> ToolExecutionResult:
    """The success path of P-OUT-1: snapshot, validate, render, meta, conclude."""

    def invalid(*violations: str) -> ToolExecutionFailure:
        return failure_from(ToolOutputError(name, violations), contexts)

    try:
        frozen = snapshot_json(value)
    except NotJsonError:
        return invalid("value is not lossless JSON")
    violations = check(frozen)
    if violations:
        return invalid(*violations)
    content = _project("render", output.render, arguments, frozen)
    if isinstance(content, _Failed):
        return invalid(content)
    if not _is_blocks(content):
        return invalid("output.render returned non-lossless JSON")
    meta = None
    if top_level and output.presentation_meta is not None:
        meta = _project("presentationMeta", output.presentation_meta, arguments, frozen)
        if isinstance(meta, _Failed):
            return invalid(meta)
    return ToolExecutionSuccess(
        value=frozen,
        content=content,
        meta=meta,
        additional_contexts=tuple(contexts),
        concludes_turn=concludes_turn,
    )


class _Failed(str):
    """A projection failure text (distinguishes it from a legitimate ``str`` meta)."""


def _project(label: str, fn: Callable[[Any, Any], Any], arguments: Any, value: Any) -> Any:
    try:
        produced = fn(arguments, value)
    except Exception as exc:
        return _Failed(f"output.{label} failed: {message_of(exc)}")
    try:
        return snapshot_json(produced)
    except NotJsonError:
        return _Failed(f"output.{label} returned non-lossless JSON")


def _is_blocks(content: Any) -> bool:
    return isinstance(content, list) and all(isinstance(b, dict) for b in content)


def block_message(feedback: Sequence[Any]) -> str:
    """The failure message of a post-execute block (P-POST-10)."""
    parts = []
    for block in feedback:
        if isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        else:
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            parts.append(f"[{kind} content]")
    return "\n".join(parts) or "tool result blocked by post-execute policy"


def _frozen_blocks(content: Any) -> Any:
    """``content`` as a frozen list of blocks, or ``NotJsonError``."""
    frozen = snapshot_json(content)
    if not _is_blocks(frozen):
        raise NotJsonError("content is not a list of blocks")
    return frozen


def _snapshot_context(message: Any) -> UserMessage:
    if not isinstance(message, UserMessage):
        raise NotJsonError("additional context is not a UserMessage")
    return UserMessage(_frozen_blocks(message.content), message.source, snapshot_json(message.meta))


_FROZEN_OR_SCALAR = (FrozenDict, FrozenList, str, int, bool, type(None))


def _already_materialized(result: Any) -> TypeGuard[ToolExecutionSuccess]:
    return (
        type(result) is ToolExecutionSuccess
        and type(result.content) is FrozenList
        and not result.additional_contexts
        and type(result.value) in _FROZEN_OR_SCALAR
        and result.meta is None
        and all(type(block) is FrozenDict for block in result.content)
    )


def materialize(result: Any) -> ToolExecutionResult:
    """A lossless, frozen copy of ``result``; anything lossy becomes the P-POST-15 error."""
    if _already_materialized(result):
        return result  # the success path built it frozen and lossless: nothing to copy
    try:
        common: dict[str, Any] = {
            "content": _frozen_blocks(result.content),
            "meta": snapshot_json(result.meta),
            "additional_contexts": tuple(_snapshot_context(c) for c in result.additional_contexts),
        }
        if isinstance(result, ToolExecutionSuccess):
            return dataclasses.replace(
                result,
                value=snapshot_json(result.value),
                concludes_turn=result.concludes_turn is True,
                **common,
            )
        if isinstance(result, ToolExecutionFailure):
            error = result.error
            if not isinstance(error, ToolFailure) or not isinstance(error.message, str):
                raise NotJsonError("error is not a ToolFailure")
            if error.info is not None and not isinstance(error.info, ToolErrorInfo):
                raise NotJsonError("error.info is not a ToolErrorInfo")
            return dataclasses.replace(result, **common)
    except (NotJsonError, TypeError, AttributeError):
        pass
    return fail(NOT_LOSSLESS)
