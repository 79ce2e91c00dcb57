"""Policies that plug into the registry's hooks, and the time budgets runtimes enforce.

- :class:`TimeoutPolicy` enforces each tool's ``timeout_ms`` (the body's budget);
- for runtimes that host the pipeline elsewhere (the Ray layer): :func:`body_timers` are
  a running execution's ``TimeoutPolicy`` deadlines (:class:`BodyTimer`), which a runner
  that queues calls for capacity pauses while a call waits and starts again when its body
  starts; :func:`with_deadline` fuses a caller's signal with a batch deadline that fires a
  :class:`DeadlineReason` (a :class:`Deadline`), and :func:`check_deadline` validates a
  ``deadline_s``.
"""

from __future__ import annotations

from toolray._body_timer import BodyTimer as BodyTimer
from toolray._body_timer import body_timers as body_timers
from toolray._signals import DeadlineReason as DeadlineReason
from toolray.pipeline._deadline import DEFAULT_KILL_GRACE_MS as DEFAULT_KILL_GRACE_MS
from toolray.pipeline._deadline import Deadline as Deadline
from toolray.pipeline._deadline import check_deadline as check_deadline
from toolray.pipeline._deadline import with_deadline as with_deadline

from ._timeout import TimeoutPolicy as TimeoutPolicy

__all__ = (
    "DEFAULT_KILL_GRACE_MS",
    "BodyTimer",
    "Deadline",
    "DeadlineReason",
    "TimeoutPolicy",
    "body_timers",
    "check_deadline",
    "with_deadline",
)
