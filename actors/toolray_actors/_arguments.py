"""How a call's arguments cross to an executor: as they are when lossless JSON, else a marker.

The driver never decides a call's outcome: arguments that are not lossless JSON travel as
:data:`NOT_JSON_ARGUMENTS`, which the executor's pipeline rejects exactly as the core rejects
the unencodable value (the P-ARGS-4 failure), and an error raised while inspecting them
travels as the ``InvalidArguments`` it is (made picklable by :func:`portable_error`).
"""

from __future__ import annotations

from typing import final

import cloudpickle

from toolray.lowlevel import InvalidArguments, is_json

__all__ = ("NOT_JSON_ARGUMENTS", "portable_error", "shippable_arguments")


@final
class _NotJsonArguments:
    """Stands for arguments that are not lossless JSON (the pipeline rejects it: P-ARGS-4)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<arguments that are not lossless JSON>"

    def __reduce__(self) -> tuple[object, ...]:
        return (_not_json, ())


def _not_json() -> _NotJsonArguments:
    return NOT_JSON_ARGUMENTS


NOT_JSON_ARGUMENTS = _NotJsonArguments()


def portable_error(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a ``RuntimeError`` with its message."""
    try:
        cloudpickle.loads(cloudpickle.dumps(exc))
    except Exception:
        return RuntimeError(str(exc) or type(exc).__name__)
    return exc


def shippable_arguments(arguments: object) -> object:
    """``arguments`` when lossless JSON, else a marker the pipeline rejects the same way."""
    if type(arguments) is InvalidArguments:
        return InvalidArguments(error=portable_error(arguments.error))
    try:
        ok = is_json(arguments)
    except Exception as exc:  # a value whose inspection raises: that error is the failure
        return InvalidArguments(error=portable_error(exc))
    return arguments if ok else NOT_JSON_ARGUMENTS
