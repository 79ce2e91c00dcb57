"""The shared frame codec: attachments, sizes, garbage (JSON round trips: tests/code)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import toolray.procs
from toolray.errors import ToolrayError
from toolray.procs import ATTACHMENT, MAX_FRAME_BYTES, FrameDecoder, ProtocolError, encode_frame


@settings(deadline=None)  # a loaded machine stalls now and then
@given(st.lists(st.tuples(st.text(min_size=1), st.binary() | st.none()), max_size=5), st.data())
def test_attachments_round_trip_whatever_the_chunking(batch, data) -> None:
    stream = b"".join(encode_frame({"op": op}, blob) for op, blob in batch)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = FrameDecoder(attachments=True)
    decoded = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoded += decoder.feed(stream[start:end])
    assert decoder.buffered == 0
    expected = [{"op": op} | ({} if blob is None else {ATTACHMENT: blob}) for op, blob in batch]
    assert decoded == expected


def test_without_attachments_bytes_after_the_json_are_garbage() -> None:
    frame = encode_frame({"op": "x"}, b"\xff\xfe")
    with pytest.raises(ProtocolError, match="a frame is not UTF-8 JSON"):
        FrameDecoder().feed(frame)


def test_an_attachment_counts_towards_the_frame_limit() -> None:
    with pytest.raises(ValueError, match=f"exceeds {MAX_FRAME_BYTES} bytes"):
        encode_frame({"op": "x"}, b"\x00" * MAX_FRAME_BYTES)
    small = FrameDecoder(max_bytes=8, attachments=True)
    with pytest.raises(ProtocolError, match="a frame of 16 bytes exceeds 8 bytes"):
        small.feed(encode_frame({"op": "x"}, b"12345"))


def test_a_protocol_error_is_a_toolray_error_with_a_short_echo() -> None:
    with pytest.raises(ProtocolError) as caught:
        FrameDecoder().feed(encode_frame({"op": "x"})[:4] + b"{" * 16)
    assert isinstance(caught.value, ToolrayError)
    assert len(str(caught.value)) < 260


def test_all_is_curated_and_resolvable() -> None:
    names = toolray.procs.__all__
    assert all(hasattr(toolray.procs, name) for name in names)
    public = {n for n in vars(toolray.procs) if not n.startswith("_") and n != "annotations"}
    assert public == set(names)
