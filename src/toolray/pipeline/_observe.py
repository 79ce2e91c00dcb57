"""The observer seam: who hears of every batch and every call, start and end.

An :class:`Observer` is told when a batch starts and ends and when a call starts (before its
pre-execute stage) and ends (once its result is final); tracing (``toolray.otel``) and a Ray
executor's statistics and metrics are observers. Process-wide observers are attached with
:func:`observe`; a batch may bring one of its own (a Ray executor records the spans of a
traced batch for the driver that sent it). A nested call — ``ctx.dispatch`` or a Code Mode
sub-call — is observed by its parent's observers, as a child of the parent's handle, so a
trace keeps its shape whichever process the call runs in.

Each observer answers a start with a handle of its own; a handle with a ``trace``
(:class:`~toolray._trace.TraceParent`) names the span the call's body runs in. With no
observer attached, a call costs one check. An observer that raises is logged and ignored:
it never changes a call's result.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolray._disposer import Disposer
from toolray._execution import ExecutionToken, ToolExecutionInput
from toolray._outcomes import ToolExecutionResult
from toolray._trace import TraceParent

__all__ = (
    "TOOL_ERROR",
    "BatchStart",
    "CallEnd",
    "CallStart",
    "Observation",
    "Observer",
    "end_batch",
    "end_call",
    "observe",
    "outcome_of",
    "record_call",
    "start_batch",
    "start_call",
)

_log = logging.getLogger("toolray")

TOOL_ERROR = "TOOL_ERROR"
"""The outcome of a failure without a code (a body raised an ordinary exception)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchStart:
    """A batch about to run."""

    scope: str | None
    calls: int
    backend: str = "in_process"
    """``"in_process"``, or ``"ray"`` when a Ray executor actor runs it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallStart:
    """A call about to start (or, with ``span``, one that ran elsewhere and is recorded)."""

    call_id: str
    name: str
    scope: str | None
    nested: bool = False
    started_ns: int | None = None
    """When it started (``time.time_ns()``); ``None``: now."""
    span: TraceParent | None = None
    """The span it ran in, when recorded after the fact (its id is already in use)."""
    parent_span: TraceParent | None = None
    """The span of its batch or parent call, when recorded after the fact."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallEnd:
    """How a call ended."""

    outcome: str
    """``"ok"``, or the failure's code (:data:`TOOL_ERROR` when it has none)."""
    message: str | None = None
    """The failure's message."""
    ended_ns: int | None = None
    """When it ended (``time.time_ns()``); ``None``: now."""


class Observer(Protocol):
    """Hears of batches and calls; every method returns quickly and never blocks."""

    def batch_started(self, batch: BatchStart) -> Any:
        """A batch starts; returns this observer's handle of it (the parent of its calls)."""
        ...

    def batch_ended(self, batch: Any, error: BaseException | None) -> None:
        """The batch of handle ``batch`` ended (``error``: it failed as a whole)."""
        ...

    def call_started(self, call: CallStart, parent: Any) -> Any:
        """A call starts; ``parent`` is the handle of its batch or parent call, or ``None``."""
        ...

    def call_ended(self, call: Any, end: CallEnd) -> None:
        """The call of handle ``call`` ended."""
        ...


class Observation:
    """Every observer's handle of one batch or call, and the span its bodies run in."""

    __slots__ = ("pairs", "trace")

    @property
    def counts_only(self) -> bool:
        """Whether every observer only counts and times calls (its ``counts_only``)."""
        return all(getattr(observer, "counts_only", False) for observer, _ in self.pairs)

    def __init__(self, pairs: Sequence[tuple[Observer, Any]]) -> None:
        self.pairs = tuple(pairs)
        self.trace: TraceParent | None = next(
            (t for _, h in self.pairs if isinstance(t := getattr(h, "trace", None), TraceParent)),
            None,
        )


_observers: tuple[Observer, ...] = ()
_lock = threading.Lock()
_by_token: weakref.WeakKeyDictionary[ExecutionToken, Observation] = weakref.WeakKeyDictionary()


def observe(observer: Observer) -> Disposer:
    """Attach ``observer`` to every batch and call of this process; the disposer detaches it."""
    global _observers
    with _lock:
        _observers = (*_observers, observer)

    def detach() -> None:
        global _observers
        with _lock:
            _observers = tuple(o for o in _observers if o is not observer)

    return Disposer(detach)


def _contained(observer: Observer, what: str, error: Exception) -> None:
    _log.warning("toolray: observer %r failed at %s: %s", observer, what, error)


def _pairs(
    observers: Sequence[tuple[Observer, Any]], method: str, *args: Any
) -> list[tuple[Observer, Any]]:
    answered = []
    for observer, parent in observers:
        try:
            answered.append((observer, getattr(observer, method)(*args, parent)))
        except Exception as err:
            _contained(observer, method, err)
    return answered


def start_batch(batch: BatchStart, own: Observer | None = None) -> Observation | None:
    """Tell the process's observers (and the batch's ``own``) that ``batch`` starts."""
    observers = _observers if own is None else (*_observers, own)
    if not observers:
        return None
    answered = []
    for observer in observers:
        try:
            answered.append((observer, observer.batch_started(batch)))
        except Exception as err:
            _contained(observer, "batch_started", err)
    return Observation(answered)


def end_batch(observed: Observation | None, error: BaseException | None = None) -> None:
    """Tell the batch's observers that it ended."""
    for observer, handle in observed.pairs if observed is not None else ():
        try:
            observer.batch_ended(handle, error)
        except Exception as err:
            _contained(observer, "batch_ended", err)


def start_call(
    inp: ToolExecutionInput, token: ExecutionToken, within: Observation | None
) -> Observation | None:
    """Observe the call ``inp`` (execution ``token``) if anyone listens; else ``None``.

    A nested call's observers are its parent's; any other call's are ``within``'s (its
    batch), else the process's.
    """
    parent = _by_token.get(inp.parent) if inp.parent is not None and _by_token else None
    if parent is None:
        parent = within
    if parent is None:
        if not _observers:
            return None
        pairs: Sequence[tuple[Observer, Any]] = [(o, None) for o in _observers]
    else:
        pairs = parent.pairs
    info = CallStart(
        call_id=inp.call_id, name=inp.name, scope=inp.scope, nested=inp.parent is not None
    )
    observed = Observation(_pairs(pairs, "call_started", info))
    _by_token[token] = observed
    return observed


def outcome_of(result: ToolExecutionResult) -> str:
    """``"ok"``, the failure's code, or :data:`TOOL_ERROR` for a failure without one."""
    if not result.is_error:
        return "ok"
    info = result.error.info
    return info.code if info is not None else TOOL_ERROR


def end_call(observed: Observation, result: ToolExecutionResult) -> None:
    """Tell the call's observers how it ended."""
    message = result.error.message if result.is_error else None
    end = CallEnd(outcome=outcome_of(result), message=message)
    for observer, handle in observed.pairs:
        try:
            observer.call_ended(handle, end)
        except Exception as err:
            _contained(observer, "call_ended", err)


def record_call(observed: Observation | None, call: CallStart, end: CallEnd) -> None:
    """A call that ran elsewhere, told to ``observed``'s observers after the fact."""
    if observed is None:
        return
    for observer, handle in _pairs(observed.pairs, "call_started", call):
        try:
            observer.call_ended(handle, end)
        except Exception as err:
            _contained(observer, "call_ended", err)
