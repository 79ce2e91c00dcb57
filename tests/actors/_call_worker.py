"""A worker whose calls run in call processes (``isolation="call"``), without Ray."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from toolray_actors._placement import WorkerSettings
from toolray_actors.execution._worker import ToolWorker


@contextlib.contextmanager
def call_worker() -> Iterator[ToolWorker]:
    """A worker with call processes (256 MB each); none of them survives it."""
    made = ToolWorker(settings=WorkerSettings(threads=4, isolation="call", memory_mb=256))
    assert made._procs is not None
    try:
        yield made
    finally:
        made._procs.close()
