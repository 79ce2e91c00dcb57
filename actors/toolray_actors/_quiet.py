"""Keep Ray's own noise about deliberate kills off the user's terminal.

Ray's driver prints ``(raylet) A worker died or was killed …`` for every worker process
that exits abnormally — including the ones toolray kills on purpose (the cancellation
ladder) or recovers from (``WORKER_LOST``). Those lines are routed to the ``toolray`` logger
at debug level instead; every other Ray message passes through unchanged.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ("install",)

_log = logging.getLogger("toolray")

_NOISE = (
    "A worker died or was killed",
    "Worker unexpectedly exits",
    "worker died unexpectedly",
    "The actor died unexpectedly",
    "Raylet is terminated",
)

_installed = False


def _is_noise(data: dict[str, Any]) -> bool:
    if data.get("pid") != "raylet":
        return False
    return any(marker in line for line in data.get("lines", ()) for marker in _NOISE)


def install() -> None:
    """Wrap Ray's driver-side printer once per process (a no-op if Ray changed it)."""
    global _installed
    if _installed:
        return
    try:
        from ray._private import worker
    except ImportError:
        return
    original = getattr(worker, "print_to_stdstream", None)
    if original is None:
        return

    def quiet(data: dict[str, Any], ignore_prefix: bool) -> None:
        if _is_noise(data):
            for line in data.get("lines", ()):
                _log.debug("ray: %s", line)
            return
        original(data, ignore_prefix)

    worker.print_to_stdstream = quiet
    _installed = True
