"""An environment instance's verbs on the local lane: the request, and its reply as data.

An executor asks a worker on its own node to open, operate on, fork or discard an instance
with one ``ENV`` message on the worker's lane (:mod:`._lane`) instead of a Ray actor call:
an ``open()`` or a ``fork()`` then waits for no Ray round trip between the two processes.
The request is the worker method's name and its arguments, pickled by the executor (the
lane takes only a connection that said the secret Ray gave the executor). The reply is
read as data, never unpickled: with ``isolation="shared"`` an environment's own code runs
in the worker, so what comes back is ``None``, bytes, an instance's pid and node, or an
error's kind and words — raised here as the Ray call's error would have been
(``EnvironmentLostError`` and ``EnvironmentFailedError`` by kind, any other as its words).
"""

from __future__ import annotations

import json
import pickle
import struct
from collections.abc import Awaitable, Callable, Mapping

from toolray import EnvironmentFailedError, EnvironmentLostError
from toolray_actors._env_wire import InstanceInfo

__all__ = ("METHODS", "EnvLaneError", "answer", "read_reply", "request")

METHODS = ("env_open", "env_operate", "env_fork", "env_discard")
"""The worker's methods an ``ENV`` message may name."""

_PID = struct.Struct("!q")
_NONE, _BYTES, _INFO, _ERROR = b"N", b"B", b"I", b"E"


class EnvLaneError(RuntimeError):
    """A worker's failure of an environment verb, in its words (its type stayed there)."""


def request(method: str, *args: object) -> bytes:
    """The ``ENV`` message asking the worker's ``method(*args)``."""
    if method not in METHODS:
        raise ValueError(f"not an environment verb of a worker: {method!r}")
    return pickle.dumps((method, args), protocol=pickle.HIGHEST_PROTOCOL)


async def answer(payload: bytes, methods: Mapping[str, Callable[..., Awaitable[object]]]) -> bytes:
    """The worker's side: run the request's method; its value or its error, as data."""
    try:
        method, args = pickle.loads(payload)
        if method not in METHODS or method not in methods:
            raise ValueError(f"not an environment verb of a worker: {method!r}")
        value = await methods[method](*args)
    except Exception as err:  # every failure crosses as words
        kind = "lost" if isinstance(err, EnvironmentLostError) else ""
        kind = "failed" if isinstance(err, EnvironmentFailedError) else kind
        text = {"kind": kind, "type": type(err).__name__, "message": str(err)}
        return _ERROR + json.dumps(text).encode()
    if value is None:
        return _NONE
    if isinstance(value, bytes):
        return _BYTES + value
    if isinstance(value, InstanceInfo):
        return _INFO + _PID.pack(value.pid) + value.node.encode()
    raise TypeError(f"an environment verb answered a {type(value).__name__}")


def read_reply(data: bytes) -> object:
    """The executor's side: the value a reply carries, or its error raised."""
    tag, body = data[:1], data[1:]
    if tag == _NONE and not body:
        return None
    if tag == _BYTES:
        return body
    if tag == _INFO and len(body) >= _PID.size:
        (pid,) = _PID.unpack_from(body)
        return InstanceInfo(pid=pid, node=body[_PID.size :].decode())
    if tag == _ERROR:
        raise _error(json.loads(body))
    raise EnvLaneError("a worker's environment reply that is not one")


def _error(text: object) -> Exception:
    if not isinstance(text, dict):
        return EnvLaneError("a worker's environment reply that is not one")
    kind, name, message = (str(text.get(k, "")) for k in ("kind", "type", "message"))
    if kind == "lost":
        return EnvironmentLostError(message)
    if kind == "failed":
        return EnvironmentFailedError(message)
    return EnvLaneError(message or name)
