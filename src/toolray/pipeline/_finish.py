"""``finish``: materialize, ``finalize_content`` exactly once, freeze, notify observers.

Runs synchronously (no await), so a commit is atomic on the ordered lane. Async observers
are scheduled as tasks (strong references kept, failures logged), never awaited (P-RES-3).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
from typing import Any

from toolray._execution import ToolExecutionInput, freeze
from toolray._normalize import failure_from, materialize, message_of
from toolray._outcomes import ToolExecutionFailure, ToolExecutionResult
from toolray.farm._bounds import truncate_blocks

from ._call import Call

__all__ = ("call_fields", "finish", "log_failure")

_log = logging.getLogger("toolray")
_observer_tasks: set[asyncio.Task[Any]] = set()


def _finalize(call: Call, result: ToolExecutionResult) -> ToolExecutionResult:
    finalizer, call.finalizer = call.finalizer, None  # exactly once (P-FIN-2)
    if finalizer is None:
        return result
    try:
        content = finalizer(call.execution, result)
    except Exception as exc:
        return materialize(failure_from(exc))
    if content is None:
        return result
    return materialize(dataclasses.replace(result, content=content))


def call_fields(inp: ToolExecutionInput) -> dict[str, Any]:
    """The attributes of a log record about call ``inp``: ``call_id``, ``tool``, ``scope``."""
    return {"call_id": inp.call_id, "tool": inp.name, "scope": inp.scope}


def _warn(call: Call, exc: BaseException) -> None:
    _log.warning(
        'tool "%s" (%s): tools/result observer failed: %s',
        call.input.name,
        call.input.call_id,
        message_of(exc),
        extra=call_fields(call.input),
    )


def log_failure(
    inp: ToolExecutionInput, result: ToolExecutionFailure, *, killed: bool = False
) -> None:
    """The one record of a failed call: a warning when its process died or was killed."""
    info = result.error.info
    code = info.code if info is not None else None
    level = logging.WARNING if killed or code == "WORKER_LOST" else logging.DEBUG
    if _log.isEnabledFor(level):
        _log.log(
            level,
            'tool "%s" (%s) failed%s: %s',
            inp.name,
            inp.call_id,
            f" [{code}]" if code else "",
            result.error.message,
            extra=call_fields(inp),
        )


def _observe(call: Call, result: ToolExecutionResult) -> None:
    for observer in call.registry.hooks("result", call.input.scope):
        try:
            outcome = observer(call.execution, result)
        except Exception as exc:
            _warn(call, exc)
            continue
        if inspect.isawaitable(outcome):
            task = asyncio.ensure_future(outcome)
            _observer_tasks.add(task)
            task.add_done_callback(functools.partial(_observer_done, call))


def _observer_done(call: Call, task: asyncio.Task[Any]) -> None:
    _observer_tasks.discard(task)
    if not task.cancelled() and task.exception() is not None:
        _warn(call, task.exception())  # type: ignore[arg-type]


def _bound(call: Call, result: ToolExecutionResult) -> ToolExecutionResult:
    """Each text block longer than the call's ``max_content_chars``, cut (its start kept)."""
    limit = call.registry.farm.content_chars(call.definition)
    if limit is None:
        return result
    blocks = truncate_blocks(result.content, limit)
    if blocks is None:
        return result
    return materialize(dataclasses.replace(result, content=blocks))


def finish(call: Call) -> ToolExecutionResult:
    """Materialize, finalize once, bound the text blocks, freeze, notify observers."""
    assert call.result is not None
    result = _bound(call, _finalize(call, materialize(call.result)))
    freeze(call.execution)
    call.result = result
    _observe(call, result)
    return result
