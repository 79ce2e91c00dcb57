"""The host's side of the frame codec: the substrate's (``toolray.procs``), by Code Mode's names."""

from __future__ import annotations

from toolray.procs import MAX_FRAME_BYTES, FrameDecoder, ProtocolError, encode_frame

__all__ = ("MAX_FRAME_BYTES", "FrameDecoder", "ProtocolError", "encode_frame")
