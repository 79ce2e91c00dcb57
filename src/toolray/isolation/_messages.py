"""The records a worker and a call's process exchange, and their frames.

Frames are ``toolray.procs``' (a 4-byte big-endian length, then one UTF-8 JSON object
whose ``op`` names the record, then optional raw bytes). Arguments and values cross as
lossless JSON; a definition's cloudpickle blob as the frame's raw bytes; what else JSON
cannot carry — an error, an abort reason, deferred contexts, a nested call's result —
pickled, base64 inside the JSON.

Worker → call process: :class:`RunCall`, :class:`AbortCall`, :class:`InterruptCall`,
:class:`NestedAnswer`. Call process → worker: :class:`CallDone`, :class:`NestedRequest`,
:class:`CallOverdue`.
A frame whose ``op`` is unknown, or that is not JSON, is a :class:`ProtocolError`.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import cloudpickle

from toolray.procs import ATTACHMENT, FrameDecoder, ProtocolError, encode_frame

from ._outcome import CallOutcome

__all__ = (
    "AbortCall",
    "CallDone",
    "CallOverdue",
    "FrameReader",
    "InterruptCall",
    "Message",
    "NestedAnswer",
    "NestedRequest",
    "ProtocolError",
    "RunCall",
    "encode",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunCall:
    """Run one body: the definition's key (and its blob if the process lacks it)."""

    token: str
    key: str
    blob: bytes | None
    arguments: Any
    ident: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortCall:
    """Fire the running body's signal with ``reason``."""

    token: str
    reason: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptCall:
    """Cancel the running body's task, or inject into its thread."""

    token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CallDone:
    """The body settled; ``clean``: the process may take another call."""

    token: str
    outcome: CallOutcome
    clean: bool
    body_s: float = 0.0
    """How long the body ran (wall time inside the call process; its tool's loading not
    counted)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOverdue:
    """The body has run its whole timeout budget (its ``timeout_s``, from its start)."""

    token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NestedRequest:
    """A body's ``ctx.dispatch``: the worker asks the call's executor and answers."""

    id: int
    token: str
    name: str
    arguments: Any
    call_id: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class NestedAnswer:
    """The nested call's result, or the error its dispatch raised."""

    id: int
    result: Any = None
    error: BaseException | None = None


Message = (
    RunCall | AbortCall | InterruptCall | CallDone | CallOverdue | NestedRequest | NestedAnswer
)


def _pickled(value: Any) -> str:
    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def _unpickled(text: str) -> Any:
    return cloudpickle.loads(base64.b64decode(text))


def _outcome_fields(outcome: CallOutcome) -> dict[str, Any]:
    fields: dict[str, Any] = {"status": outcome.status}
    if outcome.value is not None:
        fields["value"] = outcome.value
    if outcome.error is not None:
        fields["error"] = _pickled(outcome.error)
    if outcome.contexts:
        fields["contexts"] = _pickled(outcome.contexts)
    if outcome.concludes:
        fields["concludes"] = True
    if outcome.detail:
        fields["detail"] = outcome.detail
    return fields


def _outcome_of(fields: Mapping[str, Any]) -> CallOutcome:
    return CallOutcome(
        status=fields["status"],
        value=fields.get("value"),
        error=_unpickled(fields["error"]) if "error" in fields else None,
        contexts=_unpickled(fields["contexts"]) if "contexts" in fields else (),
        concludes=bool(fields.get("concludes", False)),
        detail=str(fields.get("detail", "")),
    )


def _fields(message: Message) -> dict[str, Any]:
    match message:
        case RunCall():
            return {
                "op": "run",
                "token": message.token,
                "key": message.key,
                "arguments": message.arguments,
                "ident": dict(message.ident),
            }
        case AbortCall():
            return {"op": "abort", "token": message.token, "reason": _pickled(message.reason)}
        case InterruptCall():
            return {"op": "interrupt", "token": message.token}
        case CallDone():
            fields = _outcome_fields(message.outcome)
            done = {"op": "done", "token": message.token, "clean": message.clean}
            return {**done, "body_s": round(message.body_s, 6), **fields}
        case CallOverdue():
            return {"op": "overdue", "token": message.token}
        case NestedRequest():
            return {
                "op": "nested",
                "id": message.id,
                "token": message.token,
                "name": message.name,
                "arguments": _pickled(message.arguments),
                "call_id": message.call_id,
            }
        case NestedAnswer():
            answer = message.error if message.error is not None else message.result
            return {
                "op": "answer",
                "id": message.id,
                "failed": message.error is not None,
                "payload": _pickled(answer),
            }
    raise TypeError(f"not a message: {message!r}")


def _record(fields: dict[str, Any]) -> Message:
    op = fields.get("op")
    if op == "run":
        return RunCall(
            token=fields["token"],
            key=fields["key"],
            blob=fields.get(ATTACHMENT),
            arguments=fields["arguments"],
            ident=fields["ident"],
        )
    if op == "abort":
        return AbortCall(token=fields["token"], reason=_unpickled(fields["reason"]))
    if op == "interrupt":
        return InterruptCall(token=fields["token"])
    if op == "done":
        return CallDone(
            token=fields["token"],
            outcome=_outcome_of(fields),
            clean=fields["clean"],
            body_s=float(fields.get("body_s", 0.0)),
        )
    if op == "overdue":
        return CallOverdue(token=fields["token"])
    if op == "nested":
        return NestedRequest(
            id=fields["id"],
            token=fields["token"],
            name=fields["name"],
            arguments=_unpickled(fields["arguments"]),
            call_id=fields["call_id"],
        )
    if op == "answer":
        payload = _unpickled(fields["payload"])
        if fields["failed"]:
            return NestedAnswer(id=fields["id"], error=payload)
        return NestedAnswer(id=fields["id"], result=payload)
    raise ProtocolError(f"unknown frame op {op!r}")


def encode(message: Message) -> bytes:
    """One frame holding ``message``.

    Raises:
        ValueError: the frame would be larger than ``toolray.procs.MAX_FRAME_BYTES``, or a
            value in it cannot be encoded (nested deeper than the codec goes, say).
    """
    blob = message.blob if isinstance(message, RunCall) else None
    try:
        return encode_frame(_fields(message), blob)
    except (RecursionError, TypeError, pickle.PicklingError) as err:
        raise ValueError(f"cannot be sent to another process: {err}") from None


class FrameReader:
    """Incremental: feed it bytes as they arrive, get back the complete records.

    Example:
        >>> reader = FrameReader()
        >>> data = encode(InterruptCall(token="t1"))
        >>> reader.feed(data[:3]), reader.feed(data[3:])
        ([], [InterruptCall(token='t1')])
    """

    __slots__ = ("_decoder",)

    def __init__(self) -> None:
        self._decoder = FrameDecoder(attachments=True)

    def feed(self, data: bytes) -> list[Message]:
        """Append ``data``; return every record now complete, in order.

        Raises:
            ProtocolError: a frame that is not one of the records.
        """
        return [_record(fields) for fields in self._decoder.feed(data)]
