"""Execution identity: the input a caller builds and the one object a call travels as.

``ToolExecution`` is created by the pipeline, never by callers. The same object passes
pre-execute, guards, around-dispatch, post-execute and the result observers (P-ARGS-11); its
fields are read-only, and the whole object is frozen just before the observers see it. The
around-dispatch view (``ToolDispatchExecution``) is that same object with a writable
``signal``.

This layer knows nothing above it: a step's admitted set travels as a :class:`ToolSet`, and
the runtime running a call is seen only through :class:`ExecutionHost` (its clock and the
caller's view of the tools), never as a registry.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Protocol, final, runtime_checkable

from ._clock import Clock
from ._eventlog import LogStep
from ._signals import AbortSignal

__all__ = (
    "ExecutionHost",
    "ExecutionToken",
    "ToolDispatchExecution",
    "ToolExecution",
    "ToolExecutionInput",
    "ToolSet",
    "freeze",
    "swap_signal",
)


@runtime_checkable
class ToolSet(Protocol):
    """One step's admitted registrations, as an execution carries them.

    ``ResolvedToolSet`` is the implementation; the registry's lookups read it through this
    protocol. Its values are registrations and definitions, which sit above execution
    identity, hence ``Any`` here.
    """

    @property
    def scope(self) -> str | None:
        """The scope the set was resolved for (it admits nothing for any other)."""
        ...

    def entries(self, scope: str | None) -> Mapping[str, Any]:
        """The admitted registrations ``scope`` still sees, by name, in view order."""
        ...

    def view(self, scope: str | None) -> Mapping[str, Any]:
        """The admitted definitions ``scope`` still sees, by name, in view order."""
        ...


@runtime_checkable
class ExecutionHost(Protocol):
    """The runtime running a call, as policies see it through ``execution.host``.

    A registry (in-process, or the mirror inside a Ray executor actor) is a host; a
    policy reads the clock it runs on and the definition the caller sees, so the same
    policy object works wherever the call runs.
    """

    @property
    def clock(self) -> Clock:
        """The clock deadlines run on."""
        ...

    def get(self, name: str, scope: str | None = None, tool_set: ToolSet | None = None) -> Any:
        """The definition ``scope`` sees under ``name``, or ``None``."""
        ...


@final
class ExecutionToken:
    """Opaque identity of one execution, compared by identity; ``.id`` crosses processes."""

    __slots__ = ("__weakref__", "_id")

    def __init__(self) -> None:
        self._id: str | None = None

    @property
    def id(self) -> str:
        """A UUID string, made on first use (most tokens never cross a process)."""
        if self._id is None:
            self._id = str(uuid.uuid4())
        return self._id

    def __repr__(self) -> str:
        return f"<ExecutionToken {self.id}>"

    def __reduce__(self) -> Any:
        raise TypeError("an ExecutionToken never crosses a process; send token.id instead")


@dataclass(frozen=True, slots=True)
class ToolExecutionInput:
    """One call as a caller hands it to ``execute()``.

    Example:
        >>> from toolray import AbortController
        >>> inp = ToolExecutionInput("c1", "echo", {"text": "hi"}, AbortController().signal)
        >>> inp.root_call_id is None
        True
    """

    call_id: str
    name: str
    arguments: Any
    signal: AbortSignal
    _: KW_ONLY
    root_call_id: str | None = None
    schema: Any = None
    scope: str | None = None
    tool_set: ToolSet | None = None
    parent: ExecutionToken | None = None
    log: LogStep | None = None
    """The batch step whose log records this call (a ``run_code`` call logs its sub-calls)."""


class ToolExecution:
    """One pending call inside the pipeline (arguments are the frozen snapshot)."""

    __slots__ = (
        "__weakref__",
        "_arguments",
        "_frozen",
        "_host",
        "_input",
        "_root_call_id",
        "_signal",
        "_token",
    )

    _host: ExecutionHost | None
    _input: ToolExecutionInput
    _arguments: Any
    _token: ExecutionToken
    _root_call_id: str
    _signal: AbortSignal
    _frozen: bool

    def __init__(
        self,
        inp: ToolExecutionInput,
        arguments: Any,
        token: ExecutionToken,
        host: ExecutionHost | None = None,
    ) -> None:
        init = object.__setattr__
        init(self, "_host", host)
        init(self, "_input", inp)
        init(self, "_arguments", arguments)
        init(self, "_token", token)
        init(self, "_root_call_id", inp.call_id if inp.root_call_id is None else inp.root_call_id)
        init(self, "_signal", inp.signal)
        init(self, "_frozen", False)

    call_id = property(lambda self: self._input.call_id, doc="The model's call id.")
    name = property(lambda self: self._input.name, doc="The tool name as called.")
    scope = property(lambda self: self._input.scope, doc="The calling scope (agent), or None.")
    parent = property(lambda self: self._input.parent, doc="The enclosing token, if nested.")
    schema = property(lambda self: self._input.schema, doc="Binding-time schema, if any.")
    tool_set = property(lambda self: self._input.tool_set, doc="The step's admitted set.")
    log = property(lambda self: self._input.log, doc="The batch step logging this call.")
    arguments = property(lambda self: self._arguments, doc="Frozen argument snapshot.")
    token = property(lambda self: self._token, doc="This execution's opaque token.")
    root_call_id = property(lambda self: self._root_call_id, doc="The root model call id.")
    host = property(
        lambda self: self._host, doc="The runtime running this call (its clock and tools)."
    )

    @property
    def signal(self) -> AbortSignal:
        """The current signal (the caller's, unless an around wrapper left its own)."""
        return self._signal

    @property
    def frozen(self) -> bool:
        """Whether the execution is frozen (it is, once result observers run)."""
        return self._frozen

    def __setattr__(self, name: str, value: Any) -> None:
        if not getattr(self, "_frozen", False):
            attr = getattr(type(self), name, None)
            if name.startswith("_") or (isinstance(attr, property) and attr.fset is not None):
                object.__setattr__(self, name, value)
                return
        raise AttributeError(f"ToolExecution.{name} is read-only")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ToolExecution.{name} is read-only")

    def __repr__(self) -> str:
        return f"<ToolExecution {self.name!r} call_id={self.call_id!r}>"


def freeze(execution: ToolExecution) -> None:
    """Freeze ``execution`` (the pipeline does, just before result observers see it)."""
    object.__setattr__(execution, "_frozen", True)


def swap_signal(execution: ToolExecution, signal: AbortSignal) -> None:
    """Set the signal the body sees (the dispatch stage does, whatever a wrapper did)."""
    object.__setattr__(execution, "_signal", signal)


class ToolDispatchExecution(ToolExecution):
    """The around-dispatch view: the same execution, whose ``signal`` a wrapper may replace.

    Assign ``execution.signal = s`` for the delegated lifetime and restore it the same way;
    the pipeline re-fuses the caller's signal before the body, so a replacement never
    detaches caller cancellation (P-AROUND-12).
    """

    __slots__ = ()

    @property
    def signal(self) -> AbortSignal:
        """The signal the next wrapper or the body will see (before re-fusion)."""
        return self._signal

    @signal.setter
    def signal(self, value: AbortSignal) -> None:
        if not isinstance(value, AbortSignal):
            raise TypeError("ToolDispatchExecution.signal must be an AbortSignal")
        if self._frozen:
            raise AttributeError("ToolExecution.signal is read-only once the result is final")
        object.__setattr__(self, "_signal", value)
