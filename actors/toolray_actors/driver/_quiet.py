"""Ray's notices about the workers toolray's own commands crash on purpose.

A library must not change how Ray prints in a user's process, and it need not: the workers
toolray kills itself (the cancellation ladder, an idle executor, ``teardown``) go through
``ray.kill``, which Ray reports to nobody. A worker that dies on its own — a tool that
crashes its process, a SIGKILL from outside — is reported by Ray's driver as
``(raylet) A worker died or was killed …``, and that is worth seeing: ``RayRuntime.start``
leaves Ray's printing exactly as it is.

Only the ``toolray`` command line (``demo``, ``trace``, ``bench``, ``chaos``) crashes and kills
workers on purpose to show or measure recovery. :func:`quiet_notices` routes those notices to
the ``toolray`` logger at debug level for the duration of one command, and puts Ray's printer
back afterwards.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

__all__ = ("is_noise", "quiet_notices")

_log = logging.getLogger("toolray")

_NOISE = (
    "A worker died or was killed",
    "Worker unexpectedly exits",
    "worker died unexpectedly",
    "The actor died unexpectedly",
)


def is_noise(data: dict[str, Any]) -> bool:
    """Whether a driver-side Ray record is a notice about a dead worker."""
    if data.get("pid") != "raylet":
        return False
    return any(marker in line for line in data.get("lines", ()) for marker in _NOISE)


@contextlib.contextmanager
def quiet_notices() -> Iterator[None]:
    """Route Ray's dead-worker notices to the ``toolray`` logger while the block runs."""
    try:
        from ray._private import worker
    except ImportError:
        yield
        return
    original = getattr(worker, "print_to_stdstream", None)
    if original is None:  # Ray changed: print as it does
        yield
        return

    def quiet(data: dict[str, Any], ignore_prefix: bool) -> None:
        if is_noise(data):
            for line in data.get("lines", ()):
                _log.debug("ray: %s", line)
            return
        original(data, ignore_prefix)

    worker.print_to_stdstream = quiet
    try:
        yield
    finally:
        if worker.print_to_stdstream is quiet:
            worker.print_to_stdstream = original
