"""Idempotent disposers: what every registration returns."""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, final

__all__ = ("Disposer",)


@final
class Disposer:
    """Undo one contribution. Callable, idempotent, and a context manager.

    Example:
        >>> log = []
        >>> d = Disposer(lambda: log.append("gone"))
        >>> d(); d(); log, d.disposed
        (['gone'], True)
    """

    __slots__ = ("_fn", "_lock")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn: Callable[[], Any] | None = fn
        self._lock = threading.Lock()

    @property
    def disposed(self) -> bool:
        """Whether this disposer has run."""
        return self._fn is None

    def __call__(self) -> None:
        with self._lock:
            fn, self._fn = self._fn, None
        if fn is not None:
            fn()

    def __enter__(self) -> Disposer:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self()

    def __repr__(self) -> str:
        return f"<Disposer {'disposed' if self.disposed else 'active'}>"
