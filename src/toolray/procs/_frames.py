"""The frame codec: a 4-byte big-endian length, then one UTF-8 JSON object (and its bytes).

A frame's payload is compact JSON text holding one object with a string ``op``. It may carry
a binary attachment (a pickled payload, say): the JSON text is then followed by one newline
and the raw bytes, which the decoder hands back under :data:`ATTACHMENT` when it is made with
``attachments=True``. Compact JSON text never holds a raw newline, so the split is exact.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from toolray.errors import ToolrayError

__all__ = ("ATTACHMENT", "MAX_FRAME_BYTES", "FrameDecoder", "ProtocolError", "encode_frame")

MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""The largest payload either side sends or accepts (a larger one is a protocol failure)."""
ATTACHMENT: Final = "$bytes"
"""The key under which a decoder made with ``attachments=True`` returns a frame's bytes."""

_HEADER: Final = struct.Struct(">I")


class ProtocolError(ToolrayError):
    """The other side broke the frame protocol (Code Mode reports kind ``protocol``)."""


def _compact_json() -> Callable[[Any], str]:
    """Compact JSON text, NaN and infinities refused, cycles detected (``ValueError``).

    The standard library's C encoder, made directly: ``JSONEncoder.encode`` (and
    ``json.dumps`` with an option) costs about four times as much for a small frame.
    """
    slow = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    make = getattr(json.encoder, "c_make_encoder", None)
    strings = json.encoder.encode_basestring
    if make is None:
        return slow.encode

    def encode(message: Any) -> str:
        chunks = make({}, slow.default, strings, None, ":", ",", False, False, False)(message, 0)
        return "".join(chunks)

    return encode


_encode: Final = _compact_json()


def encode_frame(message: Mapping[str, Any], attachment: bytes | None = None) -> bytes:
    r"""One frame: ``message`` as compact UTF-8 JSON behind its length, then ``attachment``.

    Raises:
        ValueError: when ``message`` holds NaN/infinities or the frame is larger than
            :data:`MAX_FRAME_BYTES`.

    Example:
        >>> encode_frame({"op": "log", "text": "hi"})
        b'\x00\x00\x00\x18{"op":"log","text":"hi"}'
        >>> encode_frame({"op": "blob"}, b"\x00\x01")[4:]
        b'{"op":"blob"}\n\x00\x01'
    """
    payload = _encode(message).encode("utf-8", "surrogatepass")
    if attachment is not None:
        payload += b"\n" + attachment
    if len(payload) > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {len(payload)} bytes exceeds {MAX_FRAME_BYTES} bytes")
    return _HEADER.pack(len(payload)) + payload


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not lossless JSON")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
"""One decoder for every frame (``json.loads`` with an option builds one per call)."""


def _decode(payload: bytes, attachments: bool) -> dict[str, Any]:
    attachment = None
    if attachments:
        cut = payload.find(b"\n")
        if cut >= 0:
            payload, attachment = payload[:cut], payload[cut + 1 :]
    try:
        text = payload.decode("utf-8", "surrogatepass")  # as encoded: lone surrogates too
        message = _DECODER.decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ProtocolError(f"a frame is not UTF-8 JSON ({str(err)[:200]})") from None
    if type(message) is not dict or type(message.get("op")) is not str:
        raise ProtocolError("a frame is not a JSON object with an op")
    if attachment is not None:
        message[ATTACHMENT] = attachment
    return message


class FrameDecoder:
    r"""Incremental: feed it bytes as they arrive, get back the complete messages.

    Example:
        >>> dec = FrameDecoder()
        >>> data = encode_frame({"op": "log", "text": "hi"})
        >>> dec.feed(data[:3]), dec.feed(data[3:])
        ([], [{'op': 'log', 'text': 'hi'}])
        >>> FrameDecoder(attachments=True).feed(encode_frame({"op": "b"}, b"\n!"))
        [{'op': 'b', '$bytes': b'\n!'}]
    """

    __slots__ = ("_attachments", "_buffer", "_max_bytes")

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES, *, attachments: bool = False) -> None:
        self._buffer = bytearray()
        self._max_bytes = max_bytes
        self._attachments = attachments

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a complete frame."""
        return len(self._buffer)

    def feed(self, data: bytes | memoryview) -> list[dict[str, Any]]:
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
            payload = bytes(buffer[start + _HEADER.size : end])
            messages.append(_decode(payload, self._attachments))
            start = end
        del buffer[:start]
        return messages
