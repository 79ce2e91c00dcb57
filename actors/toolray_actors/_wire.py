"""What crosses between a driver, the registry actor and executor actors for one call.

The driver never decides a call's outcome, and never fails where the core would give a
result: arguments travel as they are when they are lossless JSON, and otherwise as a
marker the executor's pipeline rejects exactly as the core rejects the unencodable value (the
P-ARGS-4 failure, with hooks and observers running as in-process). A step's admitted set
travels by value (:class:`~toolray_actors._toolset.RemoteToolSet`), a parent execution as
its token id, which the executor maps back to a live execution it issued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

import cloudpickle

from toolray import AbortController, ExecutionToken, ToolExecution, ToolExecutionInput
from toolray.isolation import RemoteToken
from toolray.lowlevel import InvalidArguments, is_json

from ._errors import wire_reason

__all__ = (
    "NOT_JSON_ARGUMENTS",
    "CallSpec",
    "ExecutionSnapshot",
    "RemoteToken",
    "shippable_arguments",
)


@final
class _NotJsonArguments:
    """Stands for arguments that are not lossless JSON (the pipeline rejects it: P-ARGS-4)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<arguments that are not lossless JSON>"

    def __reduce__(self) -> Any:
        return (_not_json, ())


def _not_json() -> _NotJsonArguments:
    return NOT_JSON_ARGUMENTS


NOT_JSON_ARGUMENTS = _NotJsonArguments()


def _portable_error(exc: Exception) -> Exception:
    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        return RuntimeError(str(exc) or type(exc).__name__)
    return exc


def shippable_arguments(arguments: Any) -> Any:
    """``arguments`` when lossless JSON, else a marker the pipeline rejects the same way."""
    if type(arguments) is InvalidArguments:
        return InvalidArguments(error=_portable_error(arguments.error))
    try:
        ok = is_json(arguments)
    except Exception as exc:  # a value whose inspection raises: that error is the failure
        return InvalidArguments(error=_portable_error(exc))
    return arguments if ok else NOT_JSON_ARGUMENTS


@dataclass(frozen=True, slots=True, kw_only=True)
class CallSpec:
    """One ``execute()`` call as it crosses to the executor actor."""

    key: str
    call_id: str
    name: str
    arguments: Any
    scope: str | None = None
    root_call_id: str | None = None
    schema: Any = None
    tool_set: Any = None
    parent: str | None = None
    aborted: bool = False
    reason: Any = None

    @classmethod
    def of(cls, inp: ToolExecutionInput, key: str, tool_set: Any) -> CallSpec:
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
    arguments: Any
    scope: str | None
    root_call_id: str
    schema: Any
    tool_set: Any
    nested: bool
    aborted: bool

    @classmethod
    def of(cls, execution: ToolExecution, tool_set: Any) -> ExecutionSnapshot:
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

    def rebuild(self, tool_set: Any) -> ToolExecution:
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
