"""The farm controls a definition declares: ``RateLimit`` and ``RetryPolicy``."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ("DEFAULT_RETRY_CODES", "RateLimit", "RetryPolicy")

DEFAULT_RETRY_CODES = ("WORKER_LOST", "TOOL_TIMEOUT")


def _finite(value: object, *, least: float, strict: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) and (value > least if strict else value >= least)


def _whole(value: object, least: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and value >= least


@dataclass(frozen=True, slots=True)
class RateLimit:
    """How fast a tool's bodies may start: a token bucket shared by everyone calling it.

    ``per_second`` tokens flow in, at most ``burst`` are kept (a bucket starts full), and a
    call takes one before its body is dispatched. Over any window of ``T`` seconds the
    started calls stay within ``per_second × T + burst``. A call that would wait longer than
    ``max_wait_ms`` fails ``RATE_LIMITED`` at once (``None``: wait as long as it takes).

    Example:
        >>> RateLimit(25, burst=5).burst
        5
    """

    per_second: float
    burst: int = 1
    max_wait_ms: float | None = None

    def __post_init__(self) -> None:
        if not _finite(self.per_second, least=0, strict=True):
            raise ValueError(
                f"RateLimit.per_second must be a positive finite number, not {self.per_second!r}"
            )
        if not _whole(self.burst, 1):
            raise ValueError(f"RateLimit.burst must be a positive integer, not {self.burst!r}")
        if self.max_wait_ms is not None and not _finite(self.max_wait_ms, least=0, strict=False):
            raise ValueError(
                "RateLimit.max_wait_ms must be None or a non-negative finite number, "
                f"not {self.max_wait_ms!r}"
            )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which failures of an idempotent tool are tried again, how often and how soon.

    ``attempts`` counts every attempt (the first included); the ``n``-th retry waits
    ``backoff_ms × multiplier ** (n - 1)`` first. Only failures whose code is in ``on`` are
    retried. A policy is allowed only on a tool declared ``idempotent=True``.

    Example:
        >>> RetryPolicy(attempts=4, backoff_ms=50).delay_ms(3)
        200.0
    """

    attempts: int = 3
    backoff_ms: float = 100
    multiplier: float = 2.0
    on: tuple[str, ...] = DEFAULT_RETRY_CODES

    def __post_init__(self) -> None:
        if not _whole(self.attempts, 1):
            raise ValueError(
                f"RetryPolicy.attempts must be a positive integer, not {self.attempts!r}"
            )
        if not _finite(self.backoff_ms, least=0, strict=False):
            raise ValueError(
                f"RetryPolicy.backoff_ms must be a non-negative finite number, "
                f"not {self.backoff_ms!r}"
            )
        if not _finite(self.multiplier, least=1, strict=False):
            raise ValueError(
                f"RetryPolicy.multiplier must be a finite number ≥ 1, not {self.multiplier!r}"
            )
        codes = (self.on,) if isinstance(self.on, str) else tuple(self.on)
        if not all(isinstance(code, str) and code for code in codes):
            raise ValueError(f"RetryPolicy.on must be failure codes (strings), not {self.on!r}")
        object.__setattr__(self, "on", codes)

    def delay_ms(self, retry: int) -> float:
        """How long the ``retry``-th retry (1 for the second attempt) waits before it starts."""
        return float(self.backoff_ms * self.multiplier ** (retry - 1))
