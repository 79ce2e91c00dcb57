"""Test helpers: virtual time and event-based synchronisation (never sleeps)."""

from __future__ import annotations

from ._clock import FakeClock as FakeClock
from ._gates import Gate as Gate
from ._gates import RecordingTool as RecordingTool
from ._gates import Sequencer as Sequencer

__all__ = ("FakeClock", "Gate", "RecordingTool", "Sequencer")
