"""A body's run context in a process other than its executor's: identity and dispatch."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from toolray import AbortSignal, ToolRunContext
from toolray.lowlevel import NestedDispatcher

__all__ = ("RemoteToken", "context_from_ident", "refuse_in_loop")


@final
@dataclass(frozen=True, slots=True)
class RemoteToken:
    """An execution token as seen in another process: only its ``id`` crosses."""

    id: str

    def __repr__(self) -> str:
        return f"<ExecutionToken {self.id}>"


def refuse_in_loop(where: str) -> None:
    """Raise if this thread runs an event loop: ``dispatch_sync`` would block it.

    ``where`` names whose loop it is (``"the worker's"``, ``"the body's"``).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(
        f"dispatch_sync() would block {where} event loop; an async body awaits "
        "ctx.dispatch() instead"
    )


def context_from_ident(
    signal: AbortSignal, ident: Mapping[str, Any], dispatcher: NestedDispatcher | None
) -> ToolRunContext:
    """The run context of a body whose call was issued elsewhere.

    ``ident`` is the call's identity as its executor sent it: ``call_id``, ``name``,
    ``root_call_id``, ``scope``, ``token`` and ``parent`` (token ids), and ``home`` (where
    nested calls go; the dispatcher's business, not the context's).
    """
    fields = dict(ident)
    fields.pop("home", None)
    token = fields.pop("token", None)
    parent = fields.pop("parent", None)
    return ToolRunContext(
        None,
        signal,
        dispatcher=dispatcher,
        token=RemoteToken(token) if token is not None else None,
        parent=RemoteToken(parent) if parent is not None else None,
        **fields,
    )
