"""The host's side of the frame codec: 4-byte big-endian length, then one UTF-8 JSON object."""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any, Final, NoReturn

__all__ = ("MAX_FRAME_BYTES", "FrameDecoder", "ProtocolError", "encode_frame")

MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""The largest payload either side sends or accepts (a larger one is a protocol failure)."""

_HEADER: Final = struct.Struct(">I")


class ProtocolError(Exception):
    """The child broke the frame protocol (kind ``protocol``)."""


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """One frame: ``message`` as compact UTF-8 JSON behind its length.

    Raises:
        ValueError: when ``message`` holds NaN/infinities or is larger than a frame.
    """
    payload = json.dumps(
        message, ensure_ascii=False, allow_nan=False, separators=(",", ":")
    ).encode("utf-8", "surrogatepass")
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {len(payload)} bytes exceeds {MAX_FRAME_BYTES} bytes")
    return _HEADER.pack(len(payload)) + payload


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not lossless JSON")


def _decode(payload: bytes) -> dict[str, Any]:
    try:
        message = json.loads(payload.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ProtocolError(f"a frame is not UTF-8 JSON ({err})") from None
    if type(message) is not dict or type(message.get("op")) is not str:
        raise ProtocolError("a frame is not a JSON object with an op")
    return message


class FrameDecoder:
    """Incremental: feed it bytes as they arrive, get back the complete messages.

    Example:
        >>> dec = FrameDecoder()
        >>> data = encode_frame({"op": "log", "text": "hi"})
        >>> dec.feed(data[:3]), dec.feed(data[3:])
        ([], [{'op': 'log', 'text': 'hi'}])
    """

    __slots__ = ("_buffer", "_max_bytes")

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_bytes = max_bytes

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Append ``data``; return every message now complete, in order.

        Raises:
            ProtocolError: an oversized frame, or a payload that is not a JSON object.
        """
        buffer = self._buffer
        buffer += data
        messages: list[dict[str, Any]] = []
        start = 0
        while len(buffer) - start >= _HEADER.size:
            (size,) = _HEADER.unpack_from(buffer, start)
            if size > self._max_bytes:
                raise ProtocolError(f"a frame of {size} bytes exceeds {self._max_bytes} bytes")
            end = start + _HEADER.size + size
            if len(buffer) < end:
                break
            messages.append(_decode(bytes(buffer[start + _HEADER.size : end])))
            start = end
        del buffer[:start]
        return messages
