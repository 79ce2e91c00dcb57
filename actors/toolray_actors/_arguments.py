"""How a call's arguments cross to an executor: as they are when lossless JSON, else a marker.

The driver never decides a call's outcome: arguments that are not lossless JSON travel as
:data:`NOT_JSON_ARGUMENTS`, which the executor's pipeline rejects exactly as the core rejects
the unencodable value (the P-ARGS-4 failure), and an error raised while inspecting them
travels as the ``InvalidArguments`` it is (made picklable by :func:`portable_error`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import final

import cloudpickle

from toolray import ToolCall
from toolray.lowlevel import InvalidArguments, is_json

__all__ = ("NOT_JSON_ARGUMENTS", "portable_error", "shippable_arguments", "shippable_calls")


@final
class _NotJsonArguments(Mapping[str, object]):
    """Stands for arguments that are not lossless JSON (the pipeline rejects it: P-ARGS-4).

    A ``Mapping`` (never a ``dict``) whose one value is not JSON either, so that a batch's
    call carrying it in place of its parsed arguments fails on their content, as they would.
    """

    __slots__ = ()

    def __getitem__(self, key: str) -> object:
        if key != "":
            raise KeyError(key)
        return math.nan  # not lossless JSON either

    def __iter__(self) -> Iterator[str]:
        return iter(("",))

    def __len__(self) -> int:
        return 1

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


def shippable_calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    """A batch's calls as they cross: parsed arguments that cannot cross as the marker.

    The executor's pipeline judges what crosses exactly as the core would; only parsed
    arguments (a ``Mapping``) that are neither lossless JSON nor picklable (a lock, a
    socket) are replaced, so that call fails as the core fails it (P-ARGS-4) and its batch
    goes on. The model's JSON text, the usual case, crosses untouched.
    """
    out = []
    for call in calls:
        arguments = call.arguments
        if isinstance(arguments, Mapping) and not _crosses(arguments):
            call = dataclasses.replace(call, arguments=NOT_JSON_ARGUMENTS)
        out.append(call)
    return tuple(out)


def _crosses(arguments: Mapping[str, object]) -> bool:
    try:
        if is_json(arguments):
            return True
        cloudpickle.dumps(arguments)
    except Exception:
        return False
    return True
