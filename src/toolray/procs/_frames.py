"""The frame codec: a 4-byte big-endian length, then one UTF-8 JSON object (and its bytes).

A frame's payload is compact JSON text holding one object with a string ``op``. It may carry
a binary attachment (a tool's code, say): the JSON text is then followed by one newline
and the raw bytes, which the decoder hands back under :data:`ATTACHMENT` when it is made with
``attachments=True``. Compact JSON text never holds a raw newline, so the split is exact.

The other side may be hostile (a Code Mode program, a tool body), so decoding is bounded:
a frame holds at most :data:`MAX_FRAME_BYTES` bytes, :data:`MAX_ELEMENTS` values and keys,
and nests at most :data:`MAX_DEPTH` deep; a frame past a bound is refused before a single
value of it is built. What a frame costs its reader is then at most a constant times its
bytes (the counting is a few passes over the bytes at C speed, done only for frames whose
bytes could break a bound at all).
"""

from __future__ import annotations

import itertools
import json
import operator
import re
import struct
from collections.abc import Callable, Mapping
from typing import Any, Final, NoReturn

from toolray.errors import ToolrayError

__all__ = (
    "ATTACHMENT",
    "MAX_DEPTH",
    "MAX_ELEMENTS",
    "MAX_FRAME_BYTES",
    "FrameDecoder",
    "ProtocolError",
    "check_bounds",
    "decode_json",
    "encode_frame",
)

MAX_FRAME_BYTES: Final = 16 * 1024 * 1024
"""The largest payload either side sends or accepts (a larger one is a protocol failure)."""
MAX_ELEMENTS: Final = 1 << 20
"""The most values and keys one frame may hold (counted as its JSON's ``,``, ``:``, ``[``
and ``{`` outside strings): a frame of 16 MiB of ``{},{},…`` would otherwise become 5.6
million objects in its reader."""
MAX_DEPTH: Final = 512
"""The deepest a frame's JSON may nest."""
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
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS: Final = bytes(set(range(256)) - set(b"[]{}"))
_OPENS: Final = bytes.maketrans(b"[{]}", b"\x01\x01\x00\x00")


def _deepest(skeleton: bytes) -> int:
    """The deepest nesting of JSON text without strings (linear, at C speed)."""
    opens = skeleton.translate(None, _NOT_BRACKETS).translate(_OPENS)
    # after the i-th bracket (from 1) the depth is 2 * (opens so far) - i
    doubled = map(operator.mul, itertools.accumulate(opens), itertools.repeat(2))
    return max(map(operator.sub, doubled, itertools.count(1)), default=0)


def check_bounds(payload: bytes) -> None:
    """Refuse JSON text with more than :data:`MAX_ELEMENTS` values or deeper than :data:`MAX_DEPTH`.

    Raises:
        ProtocolError: naming the bound it breaks.
    """
    if len(payload) <= 2 * MAX_DEPTH:  # too short to break either bound
        return
    opens = payload.count(b"[") + payload.count(b"{")
    if opens <= MAX_DEPTH and opens + payload.count(b",") + payload.count(b":") <= MAX_ELEMENTS:
        return  # the counts with strings included are upper bounds already
    skeleton = _STRING.sub(b'""', payload)
    opens = skeleton.count(b"[") + skeleton.count(b"{")
    elements = opens + skeleton.count(b",") + skeleton.count(b":")
    if elements > MAX_ELEMENTS:
        raise ProtocolError(f"a frame of {elements} values exceeds {MAX_ELEMENTS} values")
    if opens > MAX_DEPTH and (depth := _deepest(skeleton)) > MAX_DEPTH:
        raise ProtocolError(f"a frame nested {depth} deep exceeds {MAX_DEPTH} levels")


def decode_json(payload: bytes) -> Any:
    """One UTF-8 JSON text, within the bounds (lone surrogates come back as they were sent).

    Raises:
        ProtocolError: past a bound, or not UTF-8 JSON (NaN and infinities included).
    """
    check_bounds(payload)
    try:
        text = payload.decode("utf-8", "surrogatepass")  # as encoded: lone surrogates too
        return _DECODER.decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ProtocolError(f"a frame is not UTF-8 JSON ({str(err)[:200]})") from None


def _decode(payload: bytes, attachments: bool) -> dict[str, Any]:
    attachment = None
    if attachments:
        cut = payload.find(b"\n")
        if cut >= 0:
            payload, attachment = payload[:cut], payload[cut + 1 :]
    message = decode_json(payload)
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
