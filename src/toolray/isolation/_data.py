"""Outcomes, errors, deferred contexts and nested results as JSON data, read with suspicion.

Everything that leaves a body's process — a call process, a sandbox, or a worker whose
bodies share its process — crosses as the JSON these functions make, and is read back by
them: each field's type is checked, a name or a code is cut at
:data:`~._outcome.MAX_NAME_CHARS`, a traceback at :data:`~._outcome.MAX_TRACEBACK_CHARS`,
and anything else is a :class:`~toolray.procs.ProtocolError` (the sender broke the
protocol). No reader ever unpickles what a body's process sent.
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar, get_args

from toolray import (
    ToolErrorInfo,
    ToolExecutionFailure,
    ToolExecutionResult,
    ToolExecutionSuccess,
    ToolFailure,
    UserMessage,
    snapshot_json,
)
from toolray.lowlevel import is_json
from toolray.procs import ProtocolError, decode_json

from ._outcome import (
    MAX_NAME_CHARS,
    MAX_TRACEBACK_CHARS,
    CallOutcome,
    ErrorData,
    OutcomeStatus,
    error_data,
)

__all__ = (
    "BODY_STATUSES",
    "contexts_fields",
    "contexts_of",
    "error_fields",
    "error_of",
    "outcome_fields",
    "outcome_of",
    "outcomes_bytes",
    "outcomes_of",
    "result_fields",
    "result_of",
)

BODY_STATUSES: Final = frozenset({"ok", "error", "not_json", "missing"})
"""What a body's own process may report (the other statuses are the worker's to give)."""
_STATUSES: Final = frozenset(get_args(OutcomeStatus))
_T = TypeVar("_T")
_LENGTH: Final = struct.Struct(">I")


def _typed(fields: Mapping[str, Any], key: str, kind: type[_T], default: Any = ...) -> _T:
    value = fields.get(key, default)
    if value is ... or type(value) is not kind:
        raise ProtocolError(f'a record has no {kind.__name__} "{key[:MAX_NAME_CHARS]}"')
    return value


def _optional_str(fields: Mapping[str, Any], key: str) -> str | None:
    value = fields.get(key)
    if value is not None and type(value) is not str:
        raise ProtocolError(f'a record\'s "{key}" is not a string')
    return value


def _record(value: object, what: str) -> Mapping[str, Any]:
    if type(value) is not dict:
        raise ProtocolError(f"{what} is not a JSON object")
    return value


# ---------------------------------------------------------------- errors
def error_fields(error: ErrorData) -> dict[str, Any]:
    """``error`` as a JSON object."""
    fields: dict[str, Any] = {"name": error.name, "module": error.module}
    fields["message"] = error.message
    if error.traceback:
        fields["traceback"] = error.traceback
    if error.code is not None:
        fields["code"] = error.code
    if error.fields:
        fields["fields"] = dict(error.fields)
    return fields


def error_of(value: object) -> ErrorData:
    """The error a JSON object describes (names and codes cut, types checked)."""
    fields = _record(value, "an error")
    code = _optional_str(fields, "code")
    extra = fields.get("fields", {})
    return ErrorData(
        name=_typed(fields, "name", str)[:MAX_NAME_CHARS],
        module=_typed(fields, "module", str)[:MAX_NAME_CHARS],
        message=_typed(fields, "message", str),
        traceback=_typed(fields, "traceback", str, "")[-MAX_TRACEBACK_CHARS:],
        code=None if code is None else code[:MAX_NAME_CHARS],
        fields=dict(_record(extra, "an error's fields")),
    )


# ---------------------------------------------------------------- deferred contexts
def contexts_fields(contexts: Sequence[UserMessage]) -> list[dict[str, Any]]:
    """Deferred contexts as JSON objects.

    Raises:
        ValueError: a context's content or meta is not lossless JSON (it cannot leave).
    """
    out = []
    for message in contexts:
        fields = {"content": message.content, "source": message.source, "meta": message.meta}
        if not is_json(fields["content"]) or not is_json(fields["meta"]):
            raise ValueError("a deferred context's content and meta must be lossless JSON")
        if fields["source"] is not None and type(fields["source"]) is not str:
            raise ValueError("a deferred context's source must be a string")
        out.append(fields)
    return out


def contexts_of(value: object) -> tuple[UserMessage, ...]:
    """The deferred contexts a JSON array describes."""
    if type(value) is not list:
        raise ProtocolError("deferred contexts are not a JSON array")
    out = []
    for item in value:
        fields = _record(item, "a deferred context")
        content = _typed(fields, "content", list)
        out.append(UserMessage(content, _optional_str(fields, "source"), fields.get("meta")))
    return tuple(out)


# ---------------------------------------------------------------- outcomes
def outcome_fields(outcome: CallOutcome) -> dict[str, Any]:
    """``outcome`` as a JSON object (its contexts must be lossless JSON: ``ValueError``)."""
    fields: dict[str, Any] = {"status": outcome.status}
    if outcome.value is not None:
        fields["value"] = outcome.value
    if outcome.error is not None:
        fields["error"] = error_fields(outcome.error)
    if outcome.contexts:
        fields["contexts"] = contexts_fields(outcome.contexts)
    if outcome.concludes:
        fields["concludes"] = True
    if outcome.detail:
        fields["detail"] = outcome.detail
    return fields


def outcome_of(fields: Mapping[str, Any], statuses: frozenset[str] = _STATUSES) -> CallOutcome:
    """The outcome a JSON object describes; ``statuses`` are the ones its sender may give."""
    status = _typed(fields, "status", str)
    if status not in statuses:
        raise ProtocolError(f'an outcome\'s status "{status[:MAX_NAME_CHARS]}" is not allowed')
    error = fields.get("error")
    return CallOutcome(
        status=status,  # type: ignore[arg-type]  # checked against the statuses above
        value=fields.get("value"),
        error=None if error is None else error_of(error),
        contexts=contexts_of(fields.get("contexts", [])),
        concludes=_typed(fields, "concludes", bool, False),
        detail=_typed(fields, "detail", str, "")[:MAX_NAME_CHARS],
    )


def outcomes_bytes(settled: Sequence[tuple[str, CallOutcome | None]]) -> bytes:
    """``(token, outcome)`` pairs as bytes (a worker's reply to its executor).

    Each pair is one UTF-8 JSON text behind its 4-byte length, read on its own and within
    the frame bounds by :func:`outcomes_of`. An outcome that JSON cannot carry (a body's
    value that only passed for lossless JSON) becomes that call's failure, not the reply's.
    An outcome of ``None`` says the call's body ran its whole timeout budget (it goes on).
    """
    out = bytearray()
    for token, outcome in settled:
        if outcome is None:
            text = _json_text([token, None])
            out += _LENGTH.pack(len(text)) + text
            continue
        try:
            text = _json_text([token, outcome_fields(outcome)])
        except (ValueError, TypeError, RecursionError) as err:
            failed = CallOutcome(status="error", error=error_data(ValueError(_unsent(err))))
            text = _json_text([token, outcome_fields(failed)])
        out += _LENGTH.pack(len(text)) + text
    return bytes(out)


def _unsent(err: BaseException) -> str:
    return f"the tool's result cannot leave its process: {str(err)[:MAX_NAME_CHARS]}"


def _json_text(value: object) -> bytes:
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8", "surrogatepass")


def outcomes_of(blob: bytes) -> list[tuple[str, CallOutcome | None]]:
    """The pairs :func:`outcomes_bytes` made, read as data (never unpickled)."""
    out: list[tuple[str, CallOutcome | None]] = []
    view, at = memoryview(blob), 0
    while at < len(blob):
        if len(blob) - at < _LENGTH.size:
            raise ProtocolError("outcomes end inside a length")
        (size,) = _LENGTH.unpack_from(blob, at)
        at += _LENGTH.size
        if size > len(blob) - at:
            raise ProtocolError("outcomes end inside an outcome")
        item = decode_json(bytes(view[at : at + size]))
        at += size
        if type(item) is not list or len(item) != 2 or type(item[0]) is not str:
            raise ProtocolError("an outcome is not a [token, outcome] pair")
        if item[1] is None:  # the call's body overran its budget
            out.append((item[0], None))
            continue
        out.append((item[0], outcome_of(_record(item[1], "an outcome"))))
    return out


# ---------------------------------------------------------------- nested results
def result_fields(result: ToolExecutionResult) -> dict[str, Any]:
    """A nested call's result as a JSON object (every field of its record, by name)."""
    fields: dict[str, Any] = {"failed": result.is_error}
    for item in dataclasses.fields(result):
        value = getattr(result, item.name)
        if item.name == "error":
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
            info = value.get("info")
            if info is not None:
                value["info"] = {f.name: getattr(info, f.name) for f in dataclasses.fields(info)}
        elif item.name == "additional_contexts":
            value = contexts_fields(value)
        fields[item.name] = value
    return fields


def result_of(value: object) -> ToolExecutionResult:
    """The nested call's result a JSON object describes."""
    fields = dict(_record(value, "a nested result"))
    failed = fields.pop("failed", None)
    if type(failed) is not bool:
        raise ProtocolError('a nested result has no bool "failed"')
    fields["additional_contexts"] = contexts_of(fields.get("additional_contexts", []))
    if type(fields.get("content")) is not list:
        raise ProtocolError("a nested result's content is not a JSON array")
    for key in ("value", "content", "meta"):  # frozen, as the pipeline made them
        if key in fields:
            fields[key] = snapshot_json(fields[key])
    try:
        if not failed:
            return ToolExecutionSuccess(**fields)
        error = dict(_record(fields.pop("error", None), "a nested failure"))
        info = error.get("info")
        if info is not None:
            error["info"] = ToolErrorInfo(**_record(info, "an error's info"))
        return ToolExecutionFailure(error=ToolFailure(**error), **fields)
    except TypeError as err:  # a field its record does not have
        raise ProtocolError(f"a nested result does not fit its record: {str(err)[:200]}") from None
