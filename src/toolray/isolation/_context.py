"""A body's run context in a process other than its executor's: identity and dispatch."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from toolray import AbortSignal, ToolRunContext
from toolray.lowlevel import NestedDispatcher

__all__ = ("RemoteToken", "context_from_ident")


@final
@dataclass(frozen=True, slots=True)
class RemoteToken:
    """An execution token as seen in another process: only its ``id`` crosses."""

    id: str

    def __repr__(self) -> str:
        return f"<ExecutionToken {self.id}>"


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
