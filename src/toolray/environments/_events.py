"""What happens to instances, as it happens: open, fork, park, restore, lost, close.

Every registry's (and every Ray executor's) :class:`~._instances.Instances` tells its own
listeners, and every listener of the process (:func:`watch`) — which is how
``toolray.otel.instrument()`` records a span per event and the Ray layer its metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from toolray._disposer import Disposer

__all__ = ("EVENTS", "EnvironmentEvent", "notify", "watch")

EVENTS = ("open", "fork", "park", "restore", "lost", "close")


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvironmentEvent:
    """One event of one instance: ``seconds`` it took (``0.0`` for ``lost``), ``reason``."""

    event: str
    environment: str
    scope: str | None
    seconds: float = 0.0
    reason: str = ""


Listener = Callable[[EnvironmentEvent], object]

_lock = threading.Lock()
_listeners: list[Listener] = []


def watch(listener: Listener) -> Disposer:
    """Call ``listener(event)`` for every instance event of this process; the disposer."""
    if not callable(listener):
        raise TypeError("watch() takes a callable (event) -> None")
    with _lock:
        _listeners.append(listener)

    def stop() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return Disposer(stop)


def notify(event: EnvironmentEvent, local: list[Listener]) -> None:
    """Tell ``local`` (an instance table's own) and the process's listeners; never raises."""
    with _lock:
        listeners = [*local, *_listeners]
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # a listener's fault stays with the listener
            continue
