"""What a call's outcome from its worker means to the pipeline: its value, or its error.

The runner (``_runner``) sends a call again when its worker did not start it (``missing``:
the worker lacked its definition; ``retired``: the worker was drained, or known dead before
the call left) up to :data:`SENDS` times; any other outcome is the call's end.
"""

from __future__ import annotations

from typing import Any

from toolray import AbortError, ToolRunContext
from toolray.isolation import CallOutcome, rebuild_error

__all__ = ("NOT_JSON", "SENDS", "unpack")

SENDS = 4
"""How often a call is sent again that a worker did not start (no definition, retired)."""

NOT_JSON = object()
"""Stands for a worker value that was not lossless JSON (the executor reports it)."""


def unpack(outcome: CallOutcome, ctx: ToolRunContext) -> Any:
    """The call's value (its deferred context and turn end told to ``ctx``), or its error."""
    status = outcome.status
    if status in ("missing", "retired"):
        raise RuntimeError(f"no worker took the call after {SENDS} tries ({status})")
    for message in outcome.contexts:
        ctx.defer_context(message)
    if outcome.concludes:
        ctx.conclude_turn()
    if status == "ok":
        return outcome.value
    if status == "not_json":
        return NOT_JSON
    if status == "killed":  # the kill step's own error was raised already; a late echo
        raise AbortError("tool call aborted")
    assert outcome.error is not None, outcome
    raise rebuild_error(outcome.error)  # toolray's own class, a builtin, or a stand-in
