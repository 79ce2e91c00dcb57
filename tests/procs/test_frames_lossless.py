"""Frames carry every lossless-JSON string, lone surrogates included (encoded as decoded)."""

from __future__ import annotations

import pytest

from toolray.lowlevel import is_json
from toolray.procs import FrameDecoder, ProtocolError, encode_frame


@pytest.mark.parametrize("text", ["\ud800", "a\udfffb", "plain", "ünïcødé \U0001f600"])
def test_a_string_crosses_a_frame_unchanged(text: str) -> None:
    assert is_json(text)
    (message,) = FrameDecoder().feed(encode_frame({"op": "v", "text": text}))
    assert message["text"] == text


def test_bytes_that_are_not_utf8_are_still_a_protocol_error() -> None:
    frame = len(b'{"op":"\xff"}').to_bytes(4, "big") + b'{"op":"\xff"}'
    with pytest.raises(ProtocolError):
        FrameDecoder().feed(frame)
