"""The records of an environment instance's process: its operations and their answers.

A worker sends :class:`EnvOp` (the instance's own operations); the instance's process
answers each with :class:`EnvDone`. Their bytes (a snapshot, a definition, a pickled
function and its value) travel as the frame's raw bytes and are never unpickled by the
worker — they go on to where the state is restored, or to the driver that asked; an
instance's failures travel as text, cut where they are read. Data over 8 MiB crosses
:func:`in_parts`, joined again by :class:`Parts` within :data:`MAX_JOINED` bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from toolray.procs import ATTACHMENT, ProtocolError

__all__ = (
    "MAX_JOINED",
    "EnvDone",
    "EnvOp",
    "Parts",
    "env_done_of",
    "env_fields",
    "env_op_of",
    "in_parts",
    "pack_restore",
    "unpack_restore",
)

_ECHO = 200
"""An instance's failure text is cut to this many characters where it is read."""

_PART = 8 * 1024 * 1024
"""Bytes of an environment's data per frame (a frame holds at most 16 MiB)."""

MAX_JOINED = 1024 * 1024 * 1024
"""The most bytes one answer of an instance's process may join from its parts (1 GiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvOp:
    """An instance's own operation, run where its state lives (one at a time).

    ``op``: ``"open"`` (``create(config)``; ``data`` the definition's blob when the
    process lacks ``key``), ``"restore"`` (``data``: :func:`pack_restore` of the blob and a
    snapshot), ``"snapshot"``, ``"run"`` (``data``: a pickled ``(fn, args)``), ``"park"``
    (snapshot, then end), ``"close"`` (``close(state)``, then end) or ``"fork"`` (a
    copy-on-write copy of this process connects to the abstract socket ``address``).
    """

    op: str
    key: str = ""
    config: Any = None
    data: bytes | None = None
    address: str = ""
    more: bool = False
    """Its ``data`` continues in the next frame (a large snapshot crosses in parts)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvDone:
    """How an :class:`EnvOp` ended: ``data``, a fork's ``pid``, or ``error`` (in words).

    ``data`` is a snapshot or a pickled value; ``error`` the environment's own failure.
    """

    op: str
    ok: bool
    error: str = ""
    data: bytes | None = None
    pid: int = 0
    more: bool = False
    """Its ``data`` continues in the next frame (a large snapshot crosses in parts)."""


def in_parts(message: EnvOp | EnvDone) -> list[EnvOp | EnvDone]:
    """``message`` as frames of at most :data:`_PART` data bytes (``more`` but on the last)."""
    data = message.data
    if data is None or len(data) <= _PART:
        return [message]
    cuts = range(0, len(data), _PART)
    return [
        replace(message, data=data[at : at + _PART], more=at + _PART < len(data)) for at in cuts
    ]


class Parts:
    """Joins an environment's data sent :func:`in_parts` (one message at a time)."""

    __slots__ = ("_chunks", "_limit", "_size")

    def __init__(self, limit: int = MAX_JOINED) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._limit = limit

    def join(self, message: EnvOp | EnvDone) -> EnvOp | EnvDone | None:
        """The whole message once its last part came (``None`` before).

        Raises:
            ProtocolError: the parts come to more than its limit (:data:`MAX_JOINED`).
        """
        data = message.data or b""
        self._size += len(data)
        if self._size > self._limit:
            raise ProtocolError(f"an instance's answer is over {self._limit} bytes")
        if message.more:
            self._chunks.append(data)
            return None
        self._size = 0
        if not self._chunks:
            return message
        whole = b"".join([*self._chunks, data])
        self._chunks = []
        return replace(message, data=whole)


def pack_restore(blob: bytes | None, snapshot: bytes) -> bytes:
    """A restore's bytes: the definition's blob (empty: the process holds it), the snapshot."""
    head = blob or b""
    return len(head).to_bytes(4, "big") + head + snapshot


def unpack_restore(data: bytes) -> tuple[bytes | None, bytes]:
    """:func:`pack_restore`'s two parts."""
    size = int.from_bytes(data[:4], "big")
    return (data[4 : 4 + size] or None), data[4 + size :]


def env_fields(message: EnvOp | EnvDone) -> dict[str, Any]:
    """The JSON of an environment record (its ``data`` is the frame's attachment)."""
    if isinstance(message, EnvOp):
        return {
            "op": "env",
            "env_op": message.op,
            "key": message.key,
            "config": message.config,
            "address": message.address,
            "more": message.more,
        }
    done = {"op": "env_done", "env_op": message.op, "ok": message.ok}
    return {**done, "error": message.error, "pid": message.pid, "more": message.more}


def env_op_of(fields: Mapping[str, Any]) -> EnvOp:
    """An :class:`EnvOp` from its worker's frame."""
    return EnvOp(
        op=str(fields["env_op"]),
        key=str(fields["key"]),
        config=fields.get("config"),
        data=fields.get(ATTACHMENT),
        address=str(fields.get("address", "")),
        more=bool(fields.get("more", False)),
    )


def env_done_of(fields: Mapping[str, Any]) -> EnvDone:
    """An :class:`EnvDone` from an instance's frame, its fields checked (it is data)."""
    op, ok, error = fields.get("env_op"), fields.get("ok"), fields.get("error", "")
    pid, more, data = fields.get("pid", 0), fields.get("more", False), fields.get(ATTACHMENT)
    if type(op) is not str or type(ok) is not bool or type(more) is not bool:
        raise ProtocolError('an "env_done" frame lacks its "env_op", "ok" or "more"')
    if type(error) is not str or type(pid) is not int or pid < 0:
        raise ProtocolError('an "env_done" frame\'s "error" or "pid" is not one')
    return EnvDone(op=op[:_ECHO], ok=ok, error=error[:_ECHO], data=data, pid=pid, more=more)
