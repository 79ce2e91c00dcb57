"""The host's frame codec: round trips, partial feeds, and garbage rejected as protocol errors."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolray.code._frames import MAX_FRAME_BYTES, FrameDecoder, ProtocolError, encode_frame

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
messages = st.fixed_dictionaries({"op": st.text(min_size=1), "value": json_values})


@given(st.lists(messages, max_size=5), st.data())
def test_frames_round_trip_whatever_the_chunking(batch: list[dict], data: st.DataObject) -> None:
    stream = b"".join(encode_frame(m) for m in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder()
    decoded = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoded += decoder.feed(stream[start:end])
    assert decoded == batch


def _raw(payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + payload


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (_raw(b"hello"), "not UTF-8 JSON"),
        (_raw(b"\xff\xfe"), "not UTF-8 JSON"),
        (_raw(b'{"op": "log", "x": NaN}'), "not UTF-8 JSON"),
        (_raw(b"[1, 2]"), "not a JSON object with an op"),
        (_raw(b'{"op": 3}'), "not a JSON object with an op"),
        (b"\xff\xff\xff\xff", "exceeds"),
        (struct.pack(">I", MAX_FRAME_BYTES + 1), "exceeds"),
    ],
)
def test_garbage_is_a_protocol_error(data: bytes, why: str) -> None:
    with pytest.raises(ProtocolError, match=why):
        FrameDecoder().feed(data)


def test_an_incomplete_frame_waits_for_more() -> None:
    frame = encode_frame({"op": "log", "text": "x" * 100})
    decoder = FrameDecoder()
    assert decoder.feed(frame[:50]) == []
    assert decoder.feed(frame[50:]) == [{"op": "log", "text": "x" * 100}]


def test_encoding_rejects_nan_and_oversized_frames() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        encode_frame({"op": "reply", "value": float("nan")})
    with pytest.raises(ValueError, match="exceeds"):
        encode_frame({"op": "log", "text": "x" * (MAX_FRAME_BYTES + 1)})
