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
- :func:`nested_input` derives a nested call's input from its live parent execution
  (``parent`` token, root call id, scope, step admission) — Code Mode sub-calls use it, and
  so can any nested dispatch; :func:`current_runner` is the runner running the current
  body, which a nested call's body should run with too (a Ray executor's worker runner).
"""

from __future__ import annotations

from ._call import Call as Call
from ._dispatch import BodyRunner as BodyRunner
from ._dispatch import current_runner as current_runner
from ._dispatch import run_body_inline as run_body_inline
from ._json import is_json as is_json
from ._json import thaw_json as thaw_json
from ._layers import Entry as Entry
from ._lookup import ToolLookup as ToolLookup
from ._nested import nested_input as nested_input
from ._normalize import failure_from as failure_from
from ._pipeline import run_pipeline as run_pipeline
from ._registry import has_scope as has_scope
from ._registry import scope_parent as scope_parent

__all__ = (
    "BodyRunner",
    "Call",
    "Entry",
    "ToolLookup",
    "current_runner",
    "failure_from",
    "has_scope",
    "is_json",
    "nested_input",
    "run_body_inline",
    "run_pipeline",
    "scope_parent",
    "thaw_json",
)
