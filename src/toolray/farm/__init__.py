"""Farm controls: rate limits shared by every caller, bounded results, retries.

``RateLimit`` and ``RetryPolicy`` are also exported by ``toolray`` (what a tool author
types). The rest is for runtimes that enforce the controls across processes, such as the
Ray layer: the :class:`RateLimiter` seam (a registry's ``rate_limiter``;
:class:`LocalRateLimiter` is the in-process one), the :class:`TokenSchedule` a bucket keeps
(its answers are :class:`Reservation` values; :func:`latest_slot` is the latest slot a call
accepts), :func:`wait_until` (an abortable sleep until a slot), :func:`rate_limited` (the
``RATE_LIMITED`` error), :func:`oversized` (the ``RESULT_TOO_LARGE`` check a worker runs
where the body ran; :data:`DEFAULT_MAX_RESULT_BYTES` is the default bound) and
:class:`FarmControls` (what a registry enforces).

This package's modules import only the core's foundation and values, so definitions and
the registry can use them; this namespace module is ranked after them.
"""

from ._bounds import DEFAULT_MAX_RESULT_BYTES as DEFAULT_MAX_RESULT_BYTES
from ._bounds import json_size as json_size
from ._bounds import oversized as oversized
from ._bounds import truncation_marker as truncation_marker
from ._bucket import Reservation as Reservation
from ._bucket import TokenSchedule as TokenSchedule
from ._controls import FarmControls as FarmControls
from ._limiter import LocalRateLimiter as LocalRateLimiter
from ._limiter import RateLimiter as RateLimiter
from ._limiter import latest_slot as latest_slot
from ._limiter import rate_limited as rate_limited
from ._limiter import wait_until as wait_until
from ._values import RateLimit as RateLimit
from ._values import RetryPolicy as RetryPolicy

__all__ = (
    "DEFAULT_MAX_RESULT_BYTES",
    "FarmControls",
    "LocalRateLimiter",
    "RateLimit",
    "RateLimiter",
    "Reservation",
    "RetryPolicy",
    "TokenSchedule",
    "json_size",
    "latest_slot",
    "oversized",
    "rate_limited",
    "truncation_marker",
    "wait_until",
)
