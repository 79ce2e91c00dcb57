"""What one body's run comes to, as it crosses back to the executor, and errors as data.

A :class:`CallOutcome` is the named record a worker returns for one call, whether the body
ran in the worker itself (``"shared"`` isolation) or in a call's own process (``"call"``,
``"sandbox"``). Nothing in it is an object the body chose: its value is lossless JSON and
its error an :class:`ErrorData` — the raised class's name, its message, its traceback text
and, for toolray's coded errors, the code and fields — never a pickle. Whoever raises the
error again (the executor) rebuilds it with :func:`rebuild_error`: toolray's own classes by
name from an allow-list (:data:`REBUILT`), every other class as a stand-in that keeps its
name (a coded one as :class:`RemoteHarnessError`, whose ``name`` is the raised class's, so
``ToolErrorInfo.name`` says what the body raised). No class of the body's is ever looked up,
imported or unpickled outside the body's own process.
"""

from __future__ import annotations

import builtins
import importlib
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from toolray import AbortError, HarnessError, UserMessage
from toolray.lowlevel import is_json

__all__ = (
    "MAX_NAME_CHARS",
    "MAX_TRACEBACK_CHARS",
    "MISSING",
    "REBUILT",
    "CallOutcome",
    "ErrorData",
    "OutcomeStatus",
    "RemoteError",
    "RemoteHarnessError",
    "ToolInterrupted",
    "aborted",
    "error_data",
    "rebuild_error",
)

OutcomeStatus = Literal["ok", "error", "not_json", "missing", "lost", "killed", "retired"]
"""``ok``: ``value`` is the body's value (lossless JSON). ``error``: the body raised
``error``. ``not_json``: the body returned a value that is not lossless JSON. ``missing``:
the worker holds no definition for the call's key and none came with it. ``lost``: the
call's process died under it (``detail`` says how). ``killed``: the call's process was
killed on request (the last step of the cancellation ladder). ``retired``: the worker is
leaving its elastic pool and did not start the call (its executor sends it elsewhere)."""

MAX_NAME_CHARS: Final = 200
"""The longest class name, module name or code an error keeps (a longer one is cut)."""
MAX_TRACEBACK_CHARS: Final = 8192
"""The most of a traceback's text an error keeps (its end: the raise is at the bottom)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorData:
    """An error as data: what the body raised, by name, never the object itself.

    Example:
        >>> data = error_data(ValueError("bad"))
        >>> (data.name, data.module, data.message, data.code)
        ('ValueError', 'builtins', 'bad', None)
        >>> rebuild_error(data)
        ValueError('bad')
    """

    name: str
    """The raised class's ``__name__``."""
    module: str
    """The raised class's ``__module__`` (with ``name``, what :data:`REBUILT` is keyed by)."""
    message: str
    """Its model-facing message (``message_of``, as the pipeline reads it)."""
    traceback: str = ""
    """Its traceback as text (the last :data:`MAX_TRACEBACK_CHARS` characters)."""
    code: str | None = None
    """Its code, for a ``HarnessError``."""
    fields: Mapping[str, Any] = field(default_factory=dict)
    """A ``HarnessError``'s other attributes that are lossless JSON (``reason``,
    ``violations``, ``tool_name``, …)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    """One call's outcome: its status, value or error, and what the body deferred."""

    status: OutcomeStatus
    value: Any = None
    error: ErrorData | None = None
    contexts: tuple[UserMessage, ...] = ()
    concludes: bool = False
    detail: str = ""
    """For ``lost`` / ``killed``: how the call's process ended, in words."""


MISSING = CallOutcome(status="missing")


class ToolInterrupted(AbortError):
    """Injected into a sync body's thread when cooperation did not stop it."""

    def __init__(self) -> None:
        super().__init__("tool call aborted")
        self.reason = "the worker interrupted the tool's thread"


class RemoteHarnessError(HarnessError):
    """Stands in for a coded error whose class is not toolray's; keeps its name and code."""

    def __init__(self, message: str, code: str, name: str) -> None:
        super().__init__(message, code)
        self.original_name = name

    @property
    def name(self) -> str:
        """The raised error's class name (the ``info.name`` the executor reports)."""
        return self.original_name


class RemoteError(Exception):
    """Stands in for an uncoded error whose class is not rebuilt (a body's own, say).

    ``str()`` and ``.message`` are its message; ``original_name`` its class name.
    """

    def __init__(self, message: str, name: str) -> None:
        super().__init__(message)
        self.message = message
        self.original_name = name

    def __str__(self) -> str:
        return self.message


def _toolray_errors() -> dict[tuple[str, str], type[BaseException]]:
    import toolray.errors as errors

    found: dict[tuple[str, str], type[BaseException]] = {}
    for value in vars(errors).values():
        if isinstance(value, type) and issubclass(value, HarnessError):
            found[(value.__module__, value.__name__)] = value
    for cls in (ToolInterrupted, RemoteHarnessError):
        found[(cls.__module__, cls.__name__)] = cls
    return found


REBUILT: Final = _toolray_errors()
"""The classes an error is rebuilt as by name: toolray's coded errors, keyed by
``(module, name)``. (Builtin exception classes are rebuilt too, from their message.)"""
_ELSEWHERE: Final = {
    ("toolray.adapters._mcp_import", "McpToolError"),
    ("toolray_actors._errors", "RuntimeUnavailableError"),
}
"""Coded classes of toolray's that live in modules a reader may not have loaded yet."""


def _cut(text: str, limit: int = MAX_NAME_CHARS) -> str:
    return text if len(text) <= limit else text[:limit]


def _message(exc: BaseException) -> str:
    from toolray.lowlevel import failure_from

    try:
        return failure_from(exc).error.message
    except Exception:  # a message that cannot even be read: its class's name stands in
        return type(exc).__name__


def _traceback(exc: BaseException) -> str:
    try:
        text = "".join(traceback.format_exception(exc))
    except Exception:
        return ""
    return text[-MAX_TRACEBACK_CHARS:]


def _fields(exc: HarnessError) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in vars(exc).items():
        if key in ("message", "code") or key.startswith("_"):
            continue
        plain = list(value) if type(value) is tuple else value
        try:
            if is_json(plain):
                found[_cut(key)] = plain
        except Exception:  # an attribute that cannot be looked at stays behind
            continue
    return found


def error_data(exc: BaseException) -> ErrorData:
    """``exc`` as data, in the process that raised it (reading it runs only its own code)."""
    cls = type(exc)
    coded = exc if isinstance(exc, HarnessError) else None
    return ErrorData(
        name=_cut(str(getattr(exc, "original_name", None) or cls.__name__)),
        module=_cut(str(cls.__module__)),
        message=_message(exc),
        traceback=_traceback(exc),
        code=None if coded is None else _cut(str(coded.code)),
        fields={} if coded is None else _fields(coded),
    )


def _toolray_class(data: ErrorData) -> type[BaseException] | None:
    key = (data.module, data.name)
    cls = REBUILT.get(key)
    if cls is None and key in _ELSEWHERE:
        try:
            found = getattr(importlib.import_module(data.module), data.name)
        except (ImportError, AttributeError):
            return None
        cls = REBUILT[key] = found
    return cls


def _builtin_class(data: ErrorData) -> type[BaseException] | None:
    if data.module != "builtins":
        return None
    cls = getattr(builtins, data.name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        return cls
    return None


def rebuild_error(data: ErrorData) -> BaseException:
    """The error ``data`` describes, as an object: toolray's class, a builtin, or a stand-in.

    Only toolray's coded classes (:data:`REBUILT`) and builtin exception classes are ever
    instantiated; their state is set from ``data``'s plain fields.
    """
    cls = _toolray_class(data)
    if cls is not None and data.code is not None:
        err: BaseException = cls.__new__(cls)
        Exception.__init__(err, data.message)
        state = {k: tuple(v) if type(v) is list else v for k, v in data.fields.items()}
        err.__dict__.update((k, v) for k, v in state.items() if k.isidentifier() and k[0] != "_")
        err.__dict__.update(message=data.message, code=data.code)
    elif data.code is not None:
        err = RemoteHarnessError(data.message, data.code, data.name)
        reason = data.fields.get("reason")
        if isinstance(reason, str):
            err.reason = reason
    elif (builtin := _builtin_class(data)) is not None:
        try:
            err = builtin(data.message)
        except Exception:  # a builtin that takes other arguments (UnicodeDecodeError)
            err = RemoteError(data.message, data.name)
        if str(err) != data.message:  # KeyError quotes its message: the stand-in does not
            err = RemoteError(data.message, data.name)
    else:
        err = RemoteError(data.message, data.name)
    if data.traceback:
        err.add_note("raised in the tool's process:\n" + data.traceback)
    return err


def aborted(reason: str) -> ErrorData:
    """The ``AbortError`` of a call stopped by the worker, with ``reason``, as data."""
    stopped = AbortError("tool call aborted")
    stopped.reason = reason
    return error_data(stopped)
