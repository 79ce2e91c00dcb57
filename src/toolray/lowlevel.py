"""Low-level building blocks for runtimes that host the toolray pipeline elsewhere.

This namespace is for runtimes such as ``toolray_actors`` (the Ray layer), which run the
same registry, pipeline and bodies in other processes; it is not for applications, which
use the public ``toolray`` API. What is here is documented and kept stable
within a release line, so a runtime never has to import a private ``toolray._x`` module or
read a registry's private state:

- :func:`run_pipeline` runs one call through the whole pipeline over any
  :class:`ToolLookup` (a ``ToolRegistry`` is one), with a :data:`BodyRunner` that decides
  where the body runs (:data:`run_body_inline`: in this process);
- a runner receives the :class:`Call` record (its ``notes`` feed traces), the
  :class:`Entry` (one registration, as the pipeline resolved it) and the run context;
- :func:`is_json` / :func:`thaw_json` check and copy lossless JSON values;
- :func:`failure_from` builds the failure result of an error, as the pipeline does;
- :func:`has_scope` / :func:`scope_parent` read a registry's scope tree;
- :func:`run_nested` runs a nested call of a live parent execution through the pipeline
  of its scope (``ctx.dispatch`` is built on it, in-process and in a Ray executor actor;
  Code Mode bindings use it with their own ids), and :class:`LocalNested` is the
  in-process :class:`NestedDispatcher` a body's run context uses; :func:`not_live` is the
  rejection of a nested call whose parent execution is settled or unknown;
- :func:`chain_entries`, :func:`admitted_entries` and :func:`tool_set_of` record which
  registrations a ``ResolvedToolSet`` admitted and rebuild that set over another registry
  (a set resolved in one process, used in another);
- :class:`InvalidArguments` stands for arguments that cannot be a call's (the pipeline
  answers them with that call's own failure).
- :func:`nested_input` derives a nested call's input from its live parent execution
  (``parent`` token, root call id, scope, step admission) — Code Mode sub-calls use it, and
  so can any nested dispatch; :func:`current_runner` is the runner running the current
  body, which a nested call's body should run with too (a Ray executor's worker runner);
- the planner the scheduler runs, as pure functions: :func:`next_stage` opens a
  :class:`Stage` at its widest, :func:`joins` says whether the next call (classified just
  before it starts) belongs to it, :func:`cut` ends it early, and :func:`plan_stages` is the
  whole plan of calls whose modes are known; :data:`OPEN_ENDED` is the call count of a lane
  whose calls keep arriving; a :class:`ChainRunner` (a runner that gates bodies where they
  run) takes a batch's whole plan at once, each call carrying its :class:`Link`;
- :func:`parse_arguments` turns a model call's raw arguments (JSON text or a mapping) into
  the value a call snapshots (an :class:`InvalidArguments` when they cannot be one);
- :class:`SystemClock` is the real ``toolray.Clock`` (``toolray.testing.FakeClock`` is a
  virtual one), for a runtime that hands a registry its time source;
- the observer seam: :func:`observe` attaches an :class:`Observer` to every batch
  (:class:`BatchStart`) and call (:class:`CallStart`, :class:`CallEnd`) of the process;
  :func:`start_batch` / :func:`end_batch` / :func:`record_call` tell observers about a
  batch that runs elsewhere and its calls after the fact; :func:`outcome_of` is a result's
  outcome (``"ok"`` or its code, :data:`TOOL_ERROR` without one);
- trace context: :class:`TraceParent` is a span's W3C ``traceparent``, as it travels with a
  call, and :func:`activated` runs a body with it as the current OpenTelemetry span.
- :class:`BatchStatistics` is what ``BatchExecutor.stats()`` returns;
- :func:`not_a_definition` is the error of ``register()`` given anything but a
  ``ToolDefinition`` (a plain function gets a hint at ``@tool``), for a runtime's own
  ``register``.
- environments: a runtime that keeps instances elsewhere makes an :class:`Instances` over
  its own :class:`EnvironmentBackend` and gives it to its registry
  (``ToolRegistry(environments=...)``); :class:`Instances` keeps the table, turns and
  lifecycle over the backend (:class:`InstanceRef`
  names one instance, :class:`Parked` a parked one, :class:`InstanceCounts` counts them);
  :func:`snapshot_state` / :func:`restore_state` / :func:`invoke` run an environment's
  functions where a state lives; :func:`lost_error` / :func:`failed_error` are the errors
  of a lost instance and of an environment's own failing code; :class:`EnvironmentService`
  is what an :class:`~toolray.EnvironmentHandle` asks of its runtime;
  :data:`NO_ENVIRONMENT` is a run context's environment when its tool has none;
  :func:`watch_environments` hears every instance's :class:`EnvironmentEvent` in this
  process (open, fork, park, restore, lost, close).

The farm controls' parts a runtime needs to enforce them across processes (the rate
limiter seam, the token schedule, the result bound) are the public ``toolray.farm``.
"""

from __future__ import annotations

from ._arguments import InvalidArguments as InvalidArguments
from ._arguments import parse_arguments as parse_arguments
from ._clock import SystemClock as SystemClock
from ._context import NO_ENVIRONMENT as NO_ENVIRONMENT
from ._context import NestedDispatcher as NestedDispatcher
from ._context import not_live as not_live
from ._definition import not_a_definition as not_a_definition
from ._json import is_json as is_json
from ._json import thaw_json as thaw_json
from ._nested import nested_input as nested_input
from ._normalize import failure_from as failure_from
from ._trace import TraceParent as TraceParent
from ._trace import activated as activated
from ._trace import register_local_spans as register_local_spans
from .batch._executor import BatchStatistics as BatchStatistics
from .environments._backend import EnvironmentBackend as EnvironmentBackend
from .environments._backend import InstanceRef as InstanceRef
from .environments._backend import Parked as Parked
from .environments._backend import invoke as invoke
from .environments._backend import restore_state as restore_state
from .environments._backend import snapshot_state as snapshot_state
from .environments._events import EnvironmentEvent as EnvironmentEvent
from .environments._events import watch as watch_environments
from .environments._handle import EnvironmentService as EnvironmentService
from .environments._instances import Instances as Instances
from .environments._record import InstanceCounts as InstanceCounts
from .environments._record import failed_error as failed_error
from .environments._record import lost_error as lost_error
from .pipeline._call import Call as Call
from .pipeline._dispatch import BodyRunner as BodyRunner
from .pipeline._dispatch import current_runner as current_runner
from .pipeline._dispatch import run_body_inline as run_body_inline
from .pipeline._observe import TOOL_ERROR as TOOL_ERROR
from .pipeline._observe import BatchStart as BatchStart
from .pipeline._observe import CallEnd as CallEnd
from .pipeline._observe import CallStart as CallStart
from .pipeline._observe import Observation as Observation
from .pipeline._observe import Observer as Observer
from .pipeline._observe import end_batch as end_batch
from .pipeline._observe import observe as observe
from .pipeline._observe import outcome_of as outcome_of
from .pipeline._observe import record_call as record_call
from .pipeline._observe import start_batch as start_batch
from .pipeline._stages import LocalNested as LocalNested
from .pipeline._stages import run_nested as run_nested
from .pipeline._stages import run_pipeline as run_pipeline
from .registry._layers import Entry as Entry
from .registry._lookup import ToolLookup as ToolLookup
from .registry._registry import admitted_entries as admitted_entries
from .registry._registry import chain_entries as chain_entries
from .registry._registry import has_scope as has_scope
from .registry._registry import scope_parent as scope_parent
from .registry._registry import tool_set_of as tool_set_of
from .scheduler._chain import ChainRunner as ChainRunner
from .scheduler._chain import Link as Link
from .scheduler._plan import OPEN_ENDED as OPEN_ENDED
from .scheduler._plan import Stage as Stage
from .scheduler._plan import cut as cut
from .scheduler._plan import joins as joins
from .scheduler._plan import next_stage as next_stage
from .scheduler._plan import plan_stages as plan_stages

__all__ = (
    "NO_ENVIRONMENT",
    "OPEN_ENDED",
    "TOOL_ERROR",
    "BatchStart",
    "BatchStatistics",
    "BodyRunner",
    "Call",
    "CallEnd",
    "CallStart",
    "ChainRunner",
    "Entry",
    "EnvironmentBackend",
    "EnvironmentEvent",
    "EnvironmentService",
    "InstanceCounts",
    "InstanceRef",
    "Instances",
    "InvalidArguments",
    "Link",
    "LocalNested",
    "NestedDispatcher",
    "Observation",
    "Observer",
    "Parked",
    "Stage",
    "SystemClock",
    "ToolLookup",
    "TraceParent",
    "activated",
    "admitted_entries",
    "chain_entries",
    "current_runner",
    "cut",
    "end_batch",
    "failed_error",
    "failure_from",
    "has_scope",
    "invoke",
    "is_json",
    "joins",
    "lost_error",
    "nested_input",
    "next_stage",
    "not_a_definition",
    "not_live",
    "observe",
    "outcome_of",
    "parse_arguments",
    "plan_stages",
    "record_call",
    "register_local_spans",
    "restore_state",
    "run_body_inline",
    "run_nested",
    "run_pipeline",
    "scope_parent",
    "snapshot_state",
    "start_batch",
    "thaw_json",
    "tool_set_of",
    "watch_environments",
)
