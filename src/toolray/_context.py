"""The run context a body receives: identity, deferred contexts, nested calls, environment.

A :class:`ToolRunContext` is made for one body by the dispatch stage (in-process), a worker
or a call process (on Ray); its nested calls reach the pipeline of the calling execution's
scope through a :class:`NestedDispatcher`.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol, final

from ._content import UserMessage
from ._execution import ToolExecution
from ._outcomes import ToolExecutionResult
from ._signals import AbortSignal

__all__ = ("NO_ENVIRONMENT", "NestedDispatcher", "ToolRunContext", "not_live")


class NestedDispatcher(Protocol):
    """How a run context's nested calls reach the pipeline of the calling execution's scope.

    In-process the pipeline runs the nested call in this process; in a Ray worker the
    request goes to the executor actor that issued the calling execution, which maps the
    parent token back to that live execution. ``call_id=None`` asks for the default id
    ``<caller call id>:sub:<n>`` (see :meth:`ToolRunContext.next_sub_call_id`).
    """

    async def dispatch(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """Run one nested call for ``ctx``'s execution; returns its ``ToolExecutionResult``."""
        ...

    def dispatch_sync(
        self, ctx: ToolRunContext, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """:meth:`dispatch` for a sync body (blocks its thread, never the event loop)."""
        ...


@final
class _NoEnvironment:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no environment>"


NO_ENVIRONMENT: Any = _NoEnvironment()
"""What a run context holds as its environment when its tool has none."""


def _check_dispatch(name: Any, call_id: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"dispatch() takes a tool name (str), not {type(name).__name__}")
    if call_id is not None and not isinstance(call_id, str):
        raise TypeError(f"dispatch() call_id must be a str, not {type(call_id).__name__}")


def not_live(token_id: str) -> ValueError:
    """The rejection of a nested call whose parent execution is settled or unknown."""
    return ValueError(
        f"nested dispatch rejected: parent execution {token_id} is not live (it settled, "
        "or it was never issued here)"
    )


class ToolRunContext:
    """What a tool body receives: the execution's identity plus the runtime extensions.

    ``defer_context(message)`` attaches a context to this call's own result;
    ``conclude_turn()`` marks a successful result as concluding the turn. Both are ignored
    once the dispatch stage has collected them (P-BODY-10). ``await dispatch(name,
    arguments)`` (``dispatch_sync`` in a sync body) runs a nested call through the full
    pipeline of the calling execution's scope and returns its result.
    """

    __slots__ = (
        "_closed",
        "_concludes",
        "_contexts",
        "_dispatcher",
        "_environment",
        "_subs",
        "arguments",
        "call_id",
        "execution",
        "name",
        "parent",
        "root_call_id",
        "scope",
        "signal",
        "token",
    )

    def __init__(
        self,
        execution: ToolExecution | None,
        signal: AbortSignal,
        *,
        dispatcher: NestedDispatcher | None = None,
        environment: Any = NO_ENVIRONMENT,
        **ident: Any,
    ) -> None:
        self.execution = execution
        self._dispatcher = dispatcher
        self._environment = environment
        self._subs = itertools.count(1)
        self.signal = signal
        if execution is not None:
            inp = execution._input
            self.arguments = execution._arguments
            self.call_id: str = inp.call_id
            self.name: str = inp.name
            self.parent = inp.parent
            self.root_call_id: str = execution._root_call_id
            self.scope: str | None = inp.scope
            self.token = execution._token
        else:
            self.arguments = ident.get("arguments")
            self.call_id = ident.get("call_id", "")
            self.name = ident.get("name", "")
            self.parent = ident.get("parent")
            self.root_call_id = ident.get("root_call_id", self.call_id)
            self.scope = ident.get("scope")
            self.token = ident.get("token")  # type: ignore[assignment]
        self._contexts: list[UserMessage] = []
        self._concludes = False
        self._closed = False

    @property
    def environment(self) -> Any:
        """The live state of this call's environment instance (its scope's).

        Only a tool defined with ``environment="<name>"`` has one; elsewhere reading it
        raises ``ValueError``. The state is the instance's own object: change it in place.
        """
        state = self._environment
        if state is NO_ENVIRONMENT:
            raise ValueError(
                f'tool "{self.name}" has no environment (define it with environment="<name>")'
            )
        return state

    def defer_context(self, message: UserMessage) -> None:
        """Attach ``message`` to this call's result (in call order)."""
        if not isinstance(message, UserMessage):
            raise TypeError("defer_context() takes a UserMessage")
        if not self._closed:
            self._contexts.append(message)

    def conclude_turn(self) -> None:
        """Mark a successful result of this call as concluding the agent turn."""
        if not self._closed:
            self._concludes = True

    @property
    def settled(self) -> bool:
        """Whether the dispatch stage has collected this context (the body returned)."""
        return self._closed

    def next_sub_call_id(self) -> str:
        """The next default nested call id: ``<call id>:sub:<n>``, n = 1, 2, … per execution."""
        return f"{self.call_id}:sub:{next(self._subs)}"

    def _dispatch_target(self, name: Any, call_id: Any) -> NestedDispatcher:
        _check_dispatch(name, call_id)
        if self._closed:
            raise not_live(self.token.id if self.token is not None else self.call_id)
        if self._dispatcher is None:
            raise ValueError(
                "this run context cannot dispatch nested calls (a toolray pipeline did not make it)"
            )
        return self._dispatcher

    async def dispatch(
        self, name: str, arguments: Any, *, call_id: str | None = None
    ) -> ToolExecutionResult:
        """Run a nested call through the full pipeline of this execution's scope.

        The nested call has ``parent`` = this execution's token, its ``root_call_id``,
        ``tool_set``, scope and signal (an abort of the caller reaches it); ``call_id``
        defaults to ``<call id>:sub:<n>``, n = 1, 2, … over this execution's nested calls
        that take the default. Returns the nested ``ToolExecutionResult``; a context whose
        body has returned rejects the call with ``ValueError``.

        Example:
            >>> async def total(args, ctx):                    # doctest: +SKIP
            ...     first = await ctx.dispatch("add", {"a": 1, "b": 2})     # id c1:sub:1
            ...     return first.value
        """
        return await self._dispatch_target(name, call_id).dispatch(self, name, arguments, call_id)

    def dispatch_sync(
        self, name: str, arguments: Any, *, call_id: str | None = None
    ) -> ToolExecutionResult:
        """:meth:`dispatch` from a sync body (it blocks the body's thread until the result)."""
        target = self._dispatch_target(name, call_id)
        return target.dispatch_sync(self, name, arguments, call_id)

    def collect(self) -> tuple[tuple[UserMessage, ...], bool]:
        """Close the context and return ``(deferred contexts, concludes_turn)``."""
        self._closed = True
        return tuple(self._contexts), self._concludes
