"""Nested calls: the input of a call made on behalf of a live execution.

A nested call (a Code Mode sub-call, a composite tool's ``ctx.dispatch``) runs through the
full pipeline of its parent's scope. Its identity is derived here, in one place: ``parent``
is the parent's opaque token (never the live execution), and the root call id, scope and
step admission (``tool_set``) are the parent's. A nested call carries no log step: only
model calls write ``tool/call`` records.
"""

from __future__ import annotations

from typing import Any

from ._execution import ToolExecution, ToolExecutionInput
from ._signals import AbortSignal

__all__ = ("nested_input",)


def nested_input(
    parent: ToolExecution, name: str, arguments: Any, *, call_id: str, signal: AbortSignal
) -> ToolExecutionInput:
    """The input of a nested call of ``parent`` named ``call_id``, cancelled by ``signal``.

    Example:
        >>> from toolray import AbortController, ExecutionToken
        >>> from toolray._execution import ToolExecution
        >>> outer = ToolExecution(
        ...     ToolExecutionInput("c1", "run_code", {}, AbortController().signal, scope="a"),
        ...     {}, ExecutionToken())
        >>> inp = nested_input(outer, "echo", {}, call_id="c1:ptc:1", signal=outer.signal)
        >>> (inp.root_call_id, inp.scope, inp.parent is outer.token)
        ('c1', 'a', True)
    """
    return ToolExecutionInput(
        call_id,
        name,
        arguments,
        signal,
        root_call_id=parent.root_call_id,
        scope=parent.scope,
        tool_set=parent.tool_set,
        parent=parent.token,
    )
