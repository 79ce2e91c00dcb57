"""The executor actor's wire records: a batch, a snapshot, a worker's word on a call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolray import ToolCall
from toolray.lowlevel import InstanceCounts

from ._farm_stats import ScopeSample, ToolSample

__all__ = ("BatchSpec", "CallOverdue", "ExecutorStats")


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchSpec:
    """A batch as it crosses to the executor actor (the signal stays with the driver)."""

    batch_id: str
    calls: tuple[ToolCall, ...]
    scope: str | None = None
    max_parallel_tool_calls: int | None = None
    log: tuple[int, int] | None = None
    aborted: bool = False
    reason: Any = None
    tool_set: Any = None
    trace: str | None = None
    """The W3C ``traceparent`` of the driver's batch span: the batch is traced."""
    paced: bool = False
    """The driver reads the results at the end only (``execute_batch``): after a chunk, the
    next leaves no sooner than a short pace later, unless the batch ends first (far fewer
    stream items when calls commit one by one; ``stream_batch`` gets every commit at once)."""
    deadline_s: float | None = None
    """The batch's deadline budget (the driver keeps it too, from the submission)."""


@dataclass(frozen=True, slots=True)
class CallOverdue:
    """A worker's word, in a call's outcome stream: its body ran its whole timeout budget.

    A call that carries a budget (its identity's ``timeout_s``) has it counted on its
    worker, from the moment its body starts; past it the worker says so and the executor
    fires the call's ``TimeoutPolicy`` deadline (the ladder follows). Waiting for a call
    process or a body slot never counts.
    """

    token: str

    def __reduce__(self) -> tuple[object, ...]:
        return (CallOverdue, (self.token,))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutorStats:
    """A snapshot of one executor actor."""

    scope: str | None
    pid: int
    rss_bytes: int
    batches: int
    calls: int
    in_flight: int
    aborts: int
    interrupts: int
    kills: int
    workers_lost: int
    registry_seq: int
    contributions: int
    scopes: int = 0
    """Scopes this actor hosts (ran a batch here and were not disposed since)."""
    messages: int = 0
    """Messages that carried calls to workers; ``calls / messages`` is the coalescing."""
    local_messages: int = 0
    """Of those, the messages sent on a worker's local lane (the rest were Ray actor calls)."""
    tools: tuple[ToolSample, ...] = ()
    """Per tool: calls, in flight, failures by code, a latency sketch (merged by the driver)."""
    scope_calls: tuple[ScopeSample, ...] = ()
    """Per scope this actor ran calls for: calls, in flight, failures."""
    environments: InstanceCounts = field(default_factory=InstanceCounts)
    """Its scopes' environment instances by state, and their lifecycle events so far."""
