"""What crosses between a driver, the registry actor, executor actors and workers.

Every record kind is one frozen, slotted dataclass defined here, read by name; a reader
matches on the record's class and an unknown record is an error (:func:`unknown`).

The driver never decides a call's outcome, and never fails where the core would give a
result: arguments travel as they are when they are lossless JSON, and otherwise as a
marker the executor's pipeline rejects exactly as the core rejects the unencodable value (the
P-ARGS-4 failure, with hooks and observers running as in-process). A step's admitted set
travels by value (:class:`~toolray_actors._toolset.RemoteToolSet`), a parent execution as
its token id, which the executor maps back to a live execution it issued.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import NamedTuple, NoReturn

import cloudpickle

from toolray import (
    AbortController,
    ExecutionToken,
    ResolvedToolSet,
    ToolCallResult,
    ToolDefinition,
    ToolExecution,
    ToolExecutionInput,
    UserMessage,
)
from toolray.isolation import CallOutcome, RemoteToken
from toolray.lowlevel import Link

from ._arguments import NOT_JSON_ARGUMENTS, portable_error, shippable_arguments
from ._errors import WireRecordError, wire_reason
from ._mirror import Op
from ._tracing import SpanRecord

__all__ = (
    "NOT_JSON_ARGUMENTS",
    "AbortOrder",
    "Added",
    "BatchFailed",
    "CallSpec",
    "Committed",
    "DefinitionBlob",
    "ExecutionSnapshot",
    "ExecutorHome",
    "LogRecord",
    "MuxChunk",
    "RegistryChange",
    "RemoteToken",
    "Removed",
    "RunCodeBlob",
    "ScopeDisposed",
    "Settled",
    "StreamChunk",
    "StreamEnd",
    "StreamEntry",
    "StreamItem",
    "Swapped",
    "WorkerRequest",
    "decode",
    "definition_of",
    "encode",
    "portable_error",
    "shippable_arguments",
    "unknown",
)


def unknown(record: object, where: str) -> NoReturn:
    """An unknown record on the wire: an error, never ignored."""
    raise WireRecordError(f"{where}: unknown wire record {type(record).__name__}")


# ---------------------------------------------------------------- executor → worker
@dataclass(frozen=True, slots=True)
class WorkerRequest:
    """One call as it crosses to a worker (the first of a key on a worker carries its code)."""

    token: str
    """The call's token on that worker: abort, interrupt and kill name it."""
    key: str
    """The tool's cache key."""
    blob: bytes | None
    """The pickled definition, or ``None`` once the worker holds ``key``."""
    arguments: object
    ident: dict[str, object]
    """The call's identity (JSON: it crosses into a call process as it is)."""
    link: Link | None = None  # its place in a chain the worker gates (``ChainRunner``)

    def without_code(self) -> WorkerRequest:
        """This request without its code (the worker already holds the key)."""
        return WorkerRequest(self.token, self.key, None, self.arguments, self.ident, self.link)

    def __reduce__(self) -> tuple[object, ...]:
        # its fields in one C-pickled value (see ``packed``): a fraction of the cost per call
        fields = (self.token, self.key, self.blob, self.arguments, self.ident, self.link)
        return (_unpacked, (WorkerRequest, packed(fields)))


class ExecutorHome(NamedTuple):
    """The executor actor a body's nested calls go to (a pair: it crosses as JSON too)."""

    name: str
    namespace: str

    @classmethod
    def of(cls, value: object) -> ExecutorHome | None:
        """The home a call's identity names, or ``None`` (no executor made the call)."""
        if isinstance(value, (list, tuple)) and len(value) == 2:
            name, namespace = value
            if name:
                return cls(str(name), str(namespace))
        return None


@dataclass(frozen=True, slots=True)
class Settled:
    """One call's outcome as a worker reports it."""

    token: str
    outcome: CallOutcome

    def __reduce__(self) -> tuple[object, ...]:
        return (_unpacked, (Settled, packed((self.token, self.outcome))))


@dataclass(frozen=True, slots=True)
class AbortOrder:
    """Fire one call's signal on its worker (and, with ``kill_after``, run the ladder there).

    With per-call isolation the worker interrupts, then kills, the call's process
    ``interrupt_after`` / ``kill_after`` seconds after the abort: one message, not three.
    """

    token: str
    reason: object = None
    interrupt_after: float | None = None
    kill_after: float | None = None


# ---------------------------------------------------------------- executor → driver (a batch)
@dataclass(frozen=True, slots=True)
class LogRecord:
    """A log record of the batch, in commit order."""

    event: dict[str, object]

    def __reduce__(self) -> tuple[object, ...]:
        return (LogRecord, (self.event,))


@dataclass(frozen=True, slots=True)
class Committed:
    """A call's result, committed at its slot."""

    index: int
    result: ToolCallResult

    def __reduce__(self) -> tuple[object, ...]:
        return (Committed, (self.index, self.result))


StreamEntry = LogRecord | Committed | SpanRecord
"""What a chunk carries: a log record, a committed result, the span of a traced call."""


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """Entries that committed together, while the batch runs."""

    entries: list[StreamEntry]

    def __reduce__(self) -> tuple[object, ...]:
        return (_unpacked, (StreamChunk, packed((self.entries,))))


@dataclass(frozen=True, slots=True)
class StreamEnd:
    """The batch completed: its last entries and how it ended."""

    contexts: tuple[UserMessage, ...]
    concluded: bool
    trace: list[dict[str, object]]
    entries: list[StreamEntry]

    def __reduce__(self) -> tuple[object, ...]:
        fields = (self.contexts, self.concluded, self.trace, self.entries)
        return (_unpacked, (StreamEnd, packed(fields)))


StreamItem = StreamChunk | StreamEnd


@dataclass(frozen=True, slots=True)
class BatchFailed:
    """The batch's run raised: the error, in the batch's stream instead of Ray's."""

    error: Exception


@dataclass(frozen=True, slots=True)
class MuxChunk:
    """Stream items of several batches sent in one message, by batch id (each in order)."""

    items: dict[str, list[StreamItem | BatchFailed]]

    def __reduce__(self) -> tuple[object, ...]:
        return (_unpacked, (MuxChunk, packed((self.items,))))


def packed(fields: tuple[object, ...]) -> bytes:
    """A record's fields pickled by the C pickler, carried by Ray as one ``bytes`` value.

    Ray's cloudpickle calls a Python hook for every object it pickles (3-4x the cost for a
    chunk of results); what the C pickler refuses goes by cloudpickle (it loads the same).
    """
    try:
        return pickle.dumps(fields, protocol=5)
    except Exception:  # e.g. a local class: cloudpickle takes it by value
        blob: bytes = cloudpickle.dumps(fields, protocol=5)
        return blob


def encode(value: object, *, from_user: bool = False) -> bytes:
    """``value`` as one ``bytes`` for the hot messages between toolray's actors.

    Ray carries ``bytes`` as they are (any other value costs its own pickler on both sides,
    about 0.25 ms per round trip here). ``from_user``: it holds what a user made (a batch's
    calls, on the driver): classes of ``__main__`` (a script, a notebook) go by value.
    """
    if from_user:
        blob: bytes = cloudpickle.dumps((value,), protocol=5)
        return blob
    return packed((value,))


def decode(blob: bytes) -> object:
    """The value :func:`encode` made."""
    value: object
    (value,) = pickle.loads(blob)
    return value


_Packed = WorkerRequest | Settled | StreamChunk | StreamEnd | MuxChunk


def _unpacked(cls: type[_Packed], blob: bytes) -> _Packed:
    return cls(*pickle.loads(blob))


# ---------------------------------------------------------------- registry → executors
@dataclass(frozen=True, slots=True)
class Added:
    """A contribution was added."""

    op: Op


@dataclass(frozen=True, slots=True)
class Removed:
    """A contribution was lifted."""

    op_id: int


@dataclass(frozen=True, slots=True)
class Swapped:
    """A registration replaced a live one of its name."""

    old_id: int
    op: Op


@dataclass(frozen=True, slots=True)
class ScopeDisposed:
    """A scope was disposed with the contributions made through it."""

    key: str
    op_ids: tuple[int, ...]


RegistryChange = Added | Removed | Swapped | ScopeDisposed


# ---------------------------------------------------------------- registry → driver
@dataclass(frozen=True, slots=True)
class RunCodeBlob:
    """The ``run_code`` transport's pickle (one object per driver for every scope)."""

    blob: bytes


DefinitionBlob = bytes | RunCodeBlob | None
"""A definition as the registry actor answers a read: its pickle, the transport's, none."""

_shared: dict[bytes, ToolDefinition] = {}
"""The ``run_code`` transport by its pickle: one object for every scope (R-COND-07)."""


def definition_of(blob: DefinitionBlob) -> ToolDefinition | None:
    """The definition a read answered (the ``run_code`` transport is shared)."""
    match blob:
        case None:
            return None
        case RunCodeBlob(code):
            shared = _shared.get(code)
            if shared is None:
                shared = _shared[code] = cloudpickle.loads(code)
            return shared
        case bytes():
            return cloudpickle.loads(blob)  # type: ignore[no-any-return]
        case _:
            unknown(blob, "a definition's blob")


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSpec:
    """One ``execute()`` call as it crosses to the executor actor."""

    key: str
    call_id: str
    name: str
    arguments: object
    scope: str | None = None
    root_call_id: str | None = None
    schema: object = None
    tool_set: ResolvedToolSet | None = None
    parent: str | None = None
    aborted: bool = False
    reason: object = None

    @classmethod
    def of(cls, inp: ToolExecutionInput, key: str, tool_set: ResolvedToolSet | None) -> CallSpec:
        """The spec of ``inp`` (``tool_set`` already in its wire form)."""
        signal = inp.signal
        return cls(
            key=key,
            call_id=inp.call_id,
            name=inp.name,
            arguments=shippable_arguments(inp.arguments),
            scope=inp.scope,
            root_call_id=inp.root_call_id,
            schema=inp.schema,
            tool_set=tool_set,
            parent=inp.parent.id if inp.parent is not None else None,
            aborted=signal.aborted,
            reason=wire_reason(signal.reason) if signal.aborted else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionSnapshot:
    """What a guard may read of an execution, for ``check_guards`` in the registry actor."""

    call_id: str
    name: str
    arguments: object
    scope: str | None
    root_call_id: str
    schema: object
    tool_set: ResolvedToolSet | None
    nested: bool
    aborted: bool

    @classmethod
    def of(cls, execution: ToolExecution, tool_set: ResolvedToolSet | None) -> ExecutionSnapshot:
        """The snapshot of ``execution`` (``tool_set`` already in its wire form)."""
        return cls(
            call_id=execution.call_id,
            name=execution.name,
            arguments=shippable_arguments(execution.arguments),
            scope=execution.scope,
            root_call_id=execution.root_call_id,
            schema=execution.schema,
            tool_set=tool_set,
            nested=execution.parent is not None,
            aborted=execution.signal.aborted,
        )

    def rebuild(self, tool_set: ResolvedToolSet | None) -> ToolExecution:
        """An execution equal in every field a guard reads (fresh tokens and signal)."""
        ctrl = AbortController()
        if self.aborted:
            ctrl.abort()
        inp = ToolExecutionInput(
            self.call_id,
            self.name,
            self.arguments,
            ctrl.signal,
            root_call_id=self.root_call_id,
            schema=self.schema,
            scope=self.scope,
            tool_set=tool_set,
            parent=ExecutionToken() if self.nested else None,
        )
        return ToolExecution(inp, self.arguments, ExecutionToken())
