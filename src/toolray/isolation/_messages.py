"""The records a worker and a body's process exchange, and their frames.

Frames are ``toolray.procs``' (a 4-byte big-endian length, then one UTF-8 JSON object
whose ``op`` names the record, then optional raw bytes), read within their bounds.
Whatever a body's process sends is data: values and arguments as lossless JSON, errors,
deferred contexts and nested results as the JSON of :mod:`._data` — a worker never
unpickles anything from it. Only the worker's own records carry pickles to the body's
process: a definition's cloudpickle blob as a frame's raw bytes, an abort's reason.

Worker → body's process: :class:`RunCall`, :class:`AbortCall`, :class:`InterruptCall`,
:class:`NestedAnswer`. Body's process → worker: :class:`Ready` (a sandbox, confined),
:class:`CallDone`, :class:`CallOverdue` (its body ran its whole ``timeout_s``),
:class:`NestedRequest`. (New records join these two sets: each side reads only its own, so
a record added for one purpose never reaches the other side's code.)
Each side reads only the other's records (:class:`FrameReader` is made for one sender); a
frame whose ``op`` is not one of them, or that breaks a bound, is a :class:`ProtocolError`.
An environment instance's process also takes :class:`EnvOp` and answers :class:`EnvDone`
(:mod:`._env_messages`): the only records of a body's process with raw bytes, never
unpickled by the worker.
"""

from __future__ import annotations

import base64
import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import cloudpickle

from toolray import ToolExecutionResult
from toolray.procs import ATTACHMENT, FrameDecoder, ProtocolError, encode_frame

from ._data import (
    BODY_STATUSES,
    error_fields,
    error_of,
    outcome_fields,
    outcome_of,
    result_fields,
    result_of,
)
from ._env_messages import EnvDone, EnvOp, env_done_of, env_fields, env_op_of
from ._outcome import CallOutcome, ErrorData

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
    "Ready",
    "RunCall",
    "Sender",
    "encode",
)

Sender = Literal["worker", "body"]
"""Who wrote the frames a :class:`FrameReader` reads: the worker, or a body's process."""


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
    left: int = 0
    """Processes the body left running, killed at its call's end."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOverdue:
    """The body has run its whole timeout budget (its ``timeout_s``, from its start)."""

    token: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NestedRequest:
    """A body's ``ctx.dispatch``: the worker asks the call's executor and answers.

    ``arguments`` are lossless JSON — unless ``not_json`` (they were not: the nested call
    fails as the pipeline fails such arguments) or ``invalid`` (looking at them raised that
    error, which is the nested call's failure).
    """

    id: int
    token: str
    name: str
    arguments: Any
    call_id: str | None
    not_json: bool = False
    invalid: ErrorData | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NestedAnswer:
    """The nested call's result, or the error its dispatch raised."""

    id: int
    result: ToolExecutionResult | None = None
    error: ErrorData | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Ready:
    """A sandbox is confined and takes its call: the layers it got (``missing`` says why not)."""

    confinement: Mapping[str, Any]


Message = (
    RunCall
    | AbortCall
    | InterruptCall
    | CallDone
    | CallOverdue
    | NestedRequest
    | NestedAnswer
    | Ready
    | EnvOp
    | EnvDone
)

_FROM_BODY: Final = frozenset({"done", "overdue", "nested", "ready", "env_done"})
_FROM_WORKER: Final = frozenset({"run", "abort", "interrupt", "answer", "env"})


def _pickled(value: Any) -> str:
    return base64.b64encode(cloudpickle.dumps(value)).decode("ascii")


def _unpickled(text: str) -> Any:  # only ever in a body's process, from its worker
    return cloudpickle.loads(base64.b64decode(text))


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
            fields = outcome_fields(message.outcome)
            done = {"op": "done", "token": message.token, "clean": message.clean}
            return {**done, "body_s": round(message.body_s, 6), "left": message.left, **fields}
        case CallOverdue():
            return {"op": "overdue", "token": message.token}
        case NestedRequest():
            nested = {"op": "nested", "id": message.id, "token": message.token}
            nested |= {"name": message.name, "call_id": message.call_id}
            if message.invalid is not None:
                return nested | {"invalid": error_fields(message.invalid)}
            if message.not_json:
                return nested | {"not_json": True}
            return nested | {"arguments": message.arguments}
        case NestedAnswer():
            answer: dict[str, Any] = {"op": "answer", "id": message.id}
            if message.error is not None:
                return answer | {"error": error_fields(message.error)}
            assert message.result is not None
            return answer | {"result": result_fields(message.result)}
        case Ready():
            return {"op": "ready", "confinement": dict(message.confinement)}
        case EnvOp() | EnvDone():
            return env_fields(message)
    raise TypeError(f"not a message: {message!r}")


def _of(fields: Mapping[str, Any], key: str, kind: type) -> Any:
    value = fields.get(key)
    if type(value) is not kind:
        raise ProtocolError(f'a "{str(fields["op"])[:40]}" frame has no {kind.__name__} "{key}"')
    return value


def _from_body(fields: dict[str, Any]) -> Message:
    op = fields["op"]
    if op == "env_done":
        return env_done_of(fields)
    if fields.get(ATTACHMENT) is not None:  # raw bytes come with an instance's answer only
        raise ProtocolError(f'a "{str(op)[:40]}" frame carries bytes')
    if op == "ready":
        return Ready(confinement=_of(fields, "confinement", dict))
    if op == "overdue":
        return CallOverdue(token=_of(fields, "token", str))
    if op == "done":
        body_s = fields.get("body_s", 0.0)
        if type(body_s) not in (int, float):
            raise ProtocolError('a "done" frame\'s "body_s" is not a number')
        return CallDone(
            token=_of(fields, "token", str),
            outcome=outcome_of(fields, BODY_STATUSES),
            clean=_of(fields, "clean", bool),
            body_s=float(body_s),
            left=max(0, _of(fields, "left", int)) if "left" in fields else 0,
        )
    call_id = fields.get("call_id")
    if call_id is not None and type(call_id) is not str:
        raise ProtocolError('a "nested" frame\'s "call_id" is not a string')
    invalid = fields.get("invalid")
    return NestedRequest(
        id=_of(fields, "id", int),
        token=_of(fields, "token", str),
        name=_of(fields, "name", str),
        arguments=fields.get("arguments"),
        call_id=call_id,
        not_json=fields.get("not_json") is True,
        invalid=None if invalid is None else error_of(invalid),
    )


def _from_worker(fields: dict[str, Any]) -> Message:
    op = fields["op"]
    if op == "env":
        return env_op_of(fields)
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
    if "error" in fields:
        return NestedAnswer(id=fields["id"], error=error_of(fields["error"]))
    return NestedAnswer(id=fields["id"], result=result_of(fields["result"]))


def encode(message: Message) -> bytes:
    """One frame holding ``message``.

    Raises:
        ValueError: the frame would be larger than ``toolray.procs.MAX_FRAME_BYTES``, or a
            value in it cannot be encoded (nested deeper than the codec goes, say).
    """
    blob = message.blob if isinstance(message, RunCall) else None
    if isinstance(message, EnvOp | EnvDone):
        blob = message.data
    try:
        return encode_frame(_fields(message), blob)
    except (RecursionError, TypeError, pickle.PicklingError) as err:
        raise ValueError(f"cannot be sent to another process: {str(err)[:200]}") from None


class FrameReader:
    """Incremental: feed it bytes as they arrive, get back the complete records.

    ``sender`` is who writes them: a worker reads only a body's records (``"body"``, the
    default), a body's process only its worker's (``"worker"``).

    Example:
        >>> reader = FrameReader("worker")
        >>> data = encode(InterruptCall(token="t1"))
        >>> reader.feed(data[:3]), reader.feed(data[3:])
        ([], [InterruptCall(token='t1')])
    """

    __slots__ = ("_decoder", "_ops", "_read")

    def __init__(self, sender: Sender = "body") -> None:
        from_worker = sender == "worker"
        self._decoder = FrameDecoder(attachments=True)  # a body's: an instance's answer
        self._ops = _FROM_WORKER if from_worker else _FROM_BODY
        self._read = _from_worker if from_worker else _from_body

    def feed(self, data: bytes) -> list[Message]:
        """Append ``data``; return every record now complete, in order.

        Raises:
            ProtocolError: a frame that is not one of the sender's records, or past a bound.
        """
        out = []
        for fields in self._decoder.feed(data):
            if fields["op"] not in self._ops:
                raise ProtocolError(f'unknown frame op "{str(fields["op"])[:200]}"')
            out.append(self._read(fields))
        return out
