"""What a batch (or one call) becomes on its way from the driver to an executor actor.

- :func:`spec_of`: the batch as it crosses (``BatchSpec``); misuse raises here, before
  anything runs;
- :func:`bounded_batch` / :func:`bounded_input`: a deadline (``deadline_s``) counts from
  the submission, on the driver — the caller's signal is fused with a timer that fires a
  ``DeadlineReason``, and the abort reaches the executor actor as any abort does
  (``cancel``). A batch's spec also carries its budget, so the executor keeps the deadline
  itself should that message be late. Aborts the deadline caused end ``DEADLINE_EXCEEDED``
  in the executor's pipeline, and its ladder bounds the rest: the batch is back by the
  deadline + ``kill_grace_ms`` + the trip.
"""

from __future__ import annotations

import dataclasses

from toolray import ToolBatchInput, ToolExecutionInput
from toolray.policies import Deadline, check_deadline, with_deadline
from toolray_actors._arguments import shippable_calls
from toolray_actors._errors import wire_reason
from toolray_actors._toolset import wire_tool_set
from toolray_actors.execution._executor_actor import BatchSpec

__all__ = ("bounded_batch", "bounded_input", "spec_of")


def spec_of(batch: ToolBatchInput, scope: str | None, batch_id: str, *, paced: bool) -> BatchSpec:
    """``batch`` as it crosses to the executor actor of ``scope``."""
    if not isinstance(batch, ToolBatchInput):
        raise TypeError(f"execute_batch() takes a ToolBatchInput, not {type(batch).__name__}")
    if batch.scope is not None and batch.scope != scope:
        raise ValueError(f"batch scope {batch.scope!r} is not this executor's {scope!r}")
    log, signal = batch.log, batch.signal
    return BatchSpec(
        batch_id=batch_id,
        calls=shippable_calls(batch.calls),
        scope=scope,  # a scope-less batch runs in this executor's scope
        max_parallel_tool_calls=batch.max_parallel_tool_calls,
        log=(log.turn, log.step) if log is not None else None,
        aborted=signal.aborted,
        reason=wire_reason(signal.reason) if signal.aborted else None,
        tool_set=wire_tool_set(batch.tool_set),
        paced=paced and log is None,  # a log's records still leave as they commit
        deadline_s=batch.deadline_s,
    )


def bounded_batch(batch: ToolBatchInput, grace_ms: float) -> tuple[ToolBatchInput, Deadline]:
    """``batch`` under its deadline's signal (itself when it has none), and the deadline."""
    if not isinstance(batch, ToolBatchInput):
        raise TypeError(f"execute_batch() takes a ToolBatchInput, not {type(batch).__name__}")
    deadline = with_deadline(batch.signal, batch.deadline_s, grace_ms=grace_ms, clock=None)
    if deadline.timer is None:
        return batch, deadline
    return dataclasses.replace(batch, signal=deadline.signal), deadline


def bounded_input(
    inp: ToolExecutionInput, deadline_s: float | None, grace_ms: float
) -> tuple[ToolExecutionInput, Deadline]:
    """One call under a deadline ``deadline_s`` from now (``None``: as it is)."""
    budget = check_deadline(deadline_s)
    deadline = with_deadline(inp.signal, budget, grace_ms=grace_ms, clock=None)
    if deadline.timer is None:
        return inp, deadline
    return dataclasses.replace(inp, signal=deadline.signal), deadline
