"""Ray's notices about the workers toolray's own commands crash on purpose.

A library must not change how Ray prints in a user's process, and it need not: the workers
toolray kills itself (the cancellation ladder, an idle executor, ``teardown``) go through
``ray.kill``, which Ray reports to nobody. A worker that dies on its own — a tool that
crashes its process, a SIGKILL from outside — is reported by Ray's driver as
``(raylet) A worker died or was killed …``, and that is worth seeing: ``RayRuntime.start``
leaves Ray's printing exactly as it is.

Only the ``toolray`` command line (``demo``, ``trace``, ``bench``, ``chaos``) crashes and kills
workers on purpose to show or measure recovery. :func:`quiet_notices` routes those notices to
the ``toolray`` logger at debug level for the duration of one command, and puts the process's
streams back afterwards. It patches nothing of Ray's: Ray prints a raylet notice to
``sys.stdout`` / ``sys.stderr`` as a line ``(raylet) …``, and for the window those are
streams that drop such a line (every other write passes through unchanged).

The same window routes Ray's token-authentication notice. Ray 2.59+ starts every local
cluster with token authentication and logs a warning saying so ("Token authentication is
enabled for this Ray cluster. Set RAY_AUTH_MODE=disabled to opt out…", logger
``ray._private.authentication.authentication_token_setup``) — the first line a user saw of
every ``toolray`` command, about a choice toolray's commands do not ask the user to make.
For the window a filter on that one logger sends it to the ``toolray`` logger at debug level;
in a user's own process (``RayRuntime.start``) Ray's warning is left as it is.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import threading
from collections.abc import Iterator
from typing import TextIO

__all__ = ("TOKEN_LOGGER", "is_noise", "quiet_notices")

_log = logging.getLogger("toolray")

_NOISE = (
    "A worker died or was killed",
    "Worker unexpectedly exits",
    "worker died unexpectedly",
    "The actor died unexpectedly",
)

_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_RAYLET = re.compile(r"^\(raylet(?:, ip=[^)]*)?\) ")


def _plain(line: str) -> str:
    return _COLOUR.sub("", line).strip()


def is_noise(line: str) -> bool:
    """Whether a line Ray prints in the driver is the raylet's notice about a dead worker."""
    plain = _plain(line)
    return bool(_RAYLET.match(plain)) and any(marker in plain for marker in _NOISE)


class _Quiet:
    """A text stream that sends dead-worker notices to the log and passes the rest on."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self._dropped = threading.local()  # the notice whose line end ``print`` sends next

    def write(self, text: str) -> int:
        if getattr(self._dropped, "end", False) and text == "\n":
            self._dropped.end = False
            return len(text)
        self._dropped.end = False
        if is_noise(text):
            _log.debug("ray: %s", _RAYLET.sub("", _plain(text)))
            self._dropped.end = not text.endswith("\n")
            return len(text)
        return self.stream.write(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"
"""The logger of Ray's token-authentication notices (enabled, or disabled, by default)."""


class _TokenNotice(logging.Filter):
    """Sends Ray's token-authentication notice to the ``toolray`` logger instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Token authentication is"):
            _log.debug("ray: %s", message)
            return False
        return True


@contextlib.contextmanager
def quiet_notices() -> Iterator[None]:
    """Route Ray's dead-worker and token notices to the ``toolray`` logger while the block runs."""
    out, err = _Quiet(sys.stdout), _Quiet(sys.stderr)
    sys.stdout, sys.stderr = out, err
    token, notice = logging.getLogger(TOKEN_LOGGER), _TokenNotice()
    token.addFilter(notice)
    try:
        yield
    finally:
        token.removeFilter(notice)
        if sys.stdout is out:
            sys.stdout = out.stream
        if sys.stderr is err:
            sys.stderr = err.stream
