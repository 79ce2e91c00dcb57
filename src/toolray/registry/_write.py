"""The write side, shared by the registry (its global layer) and every scope handle.

Each contribution lands in the layer of the registry or of the scope it was made on, in the
:class:`~toolray.registry._state.RegistryState`, and returns the exact :class:`Disposer`
that lifts it (R-REG-17). A scope handle owns its disposers and unwinds them in reverse
order when the scope is disposed (R-REG-16, R-EVT-07); then the state forgets the scope.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from toolray._definition import (
    RESERVED_TOOL_NAME,
    ToolDefinition,
    check_registration,
    not_a_definition,
)
from toolray._disposer import Disposer
from toolray.environments._definition import EnvironmentDefinition

from ._layers import Entry, GuardEntry, Hook, HookKind, Layer, Restriction
from ._state import MODES, RegistryState

__all__ = ("ScopedTools", "Scopes", "WriteSide")

_RESTRICT_UNSCOPED = (
    "restrict() requires a scoped context (registry.scope(key)): a context-global restriction "
    "would mask every agent — deny the tool for the intended agent instead"
)
_RESTRICT_EMPTY = (
    "restrict() is a no-op: pass `allow` and/or `deny` (an empty filter is almost always a "
    "materialized-empty-config bug)"
)
_RESTRICT_RESERVED = (
    f'restrict() cannot name reserved Code Mode presentation transport "{RESERVED_TOOL_NAME}"; '
    "restrict end-capability tools instead"
)
_PRESENT_UNSCOPED = (
    "present_as() requires a scoped context (registry.scope(key)): a context-global "
    "presentation is the `mode` argument of ToolRegistry"
)


def _names(value: Any, side: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"restrict() {side} must be a list of tool names, not {value!r}")
    names = list(value)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"restrict() {side} must be a list of tool names, not {value!r}")
    return names


class WriteSide:
    """Registration methods of one layer (``key=None`` is the global layer)."""

    def __init__(self, state: RegistryState, key: str | None) -> None:
        self._state = state
        self._key = key

    # ------------------------------------------------------------------ plumbing
    def _own(self, disposer: Disposer) -> Disposer:
        return disposer

    def _layer(self) -> Layer:
        return self._state.layer_for_write(self._key)

    def _commit(
        self,
        layer: Layer,
        undo: Callable[[], bool | None],
        *,
        emit: bool,
        rollback: Callable[[], None] | None = None,
    ) -> Disposer:
        """Publish a contribution; a throwing change listener rolls it back (R-EVT-09).

        ``undo`` lifts the contribution when its disposer runs (returning ``False`` when
        there was nothing left to lift: no version bump, no event); ``rollback`` restores
        the state before the contribution (``undo`` unless given).
        """
        state = self._state
        state.touch(layer)
        if emit:
            try:
                state.emit_change()
            except Exception:
                (rollback or undo)()
                state.touch(layer)
                state.emit_change()  # a second failure replaces the first
                raise

        def dispose() -> None:
            if undo() is False:
                return
            state.touch(layer)
            if emit:
                state.emit_change_contained()

        return self._own(Disposer(dispose))

    # ------------------------------------------------------------------ tools
    def register(
        self,
        definition: ToolDefinition,
        *,
        when: Callable[[Any], Any] | None = None,
        replace: bool = False,
    ) -> Disposer:
        """Register ``definition`` in this layer; ``when`` makes it conditional.

        A name is unique per layer: a second registration raises ``ValueError``, unless
        ``replace=True``, which swaps the live registration of that name (keeping its
        position) in one change event. The returned disposer lifts the new registration;
        the replaced one's disposer no longer lifts anything.
        """
        self._check_live()
        if not isinstance(definition, ToolDefinition):
            raise not_a_definition(definition)
        check_registration(definition)
        if when is not None and not callable(when):
            raise TypeError(f'tool "{definition.name}" when must be callable')
        layer = self._layer()
        name = definition.name
        previous = layer.tools.get(name)
        if previous is not None and not replace:
            self._state.discard_if_empty(layer)
            if self._key is None:
                raise ValueError(
                    f'tool "{name}" is already registered (for a per-agent variant, register '
                    "through that agent's registry.scope(key) instead)"
                )
            raise ValueError(f'tool "{name}" is already registered in this scope')
        entry = Entry(definition=definition, when=when, layer_key=self._key)
        layer.tools[name] = entry
        if previous is not None:
            previous.alive = False

        def undo() -> bool:
            entry.alive = False
            if layer.tools.get(name) is not entry:
                return False  # replaced (or already lifted): nothing of it is live
            del layer.tools[name]
            return True

        def rollback() -> None:
            entry.alive = False
            if previous is None:
                layer.tools.pop(name, None)
            else:
                previous.alive = True
                layer.tools[name] = previous

        return self._commit(layer, undo, emit=True, rollback=rollback)

    def register_environment(self, definition: EnvironmentDefinition) -> Disposer:
        """Register an environment in this layer (its tools' scopes see it, nearest first).

        A name is unique per layer (``ValueError``); a scope's own registration shadows a
        global one of the same name. The disposer lifts it (open instances keep running
        until they close).
        """
        self._check_live()
        if not isinstance(definition, EnvironmentDefinition):
            kind = type(definition).__name__
            raise TypeError(
                f"register_environment() takes an EnvironmentDefinition (from "
                f"define_environment), not {kind}"
            )
        layer = self._layer()
        name = definition.name
        if name in layer.environments:
            self._state.discard_if_empty(layer)
            where = "" if self._key is None else " in this scope"
            raise ValueError(f'environment "{name}" is already registered{where}')
        layer.environments[name] = definition

        def undo() -> bool:
            if layer.environments.get(name) is not definition:
                return False
            del layer.environments[name]
            return True

        return self._commit(layer, undo, emit=True)

    def restrict(
        self, *, allow: Iterable[str] | None = None, deny: Iterable[str] | None = None
    ) -> Disposer:
        """Mask inherited tools for this scope (scope handles only)."""
        if self._key is None:
            raise ValueError(_RESTRICT_UNSCOPED)
        self._check_live()
        allow_names, deny_names = _names(allow, "allow"), _names(deny, "deny")
        if allow_names is None and deny_names is None:
            raise ValueError(_RESTRICT_EMPTY)
        named = [*(allow_names or ()), *(deny_names or ())]
        if RESERVED_TOOL_NAME in named:
            raise ValueError(_RESTRICT_RESERVED)
        known = self._state.restrictable(self._key)
        unknown = [n for n in named if n not in known]
        if unknown:
            listed = ", ".join(f'"{n}"' for n in unknown)
            noun = "tool" if len(unknown) == 1 else "tools"
            known_text = ", ".join(sorted(known)) or "(none)"
            raise ValueError(
                f"restrict() names unknown global {noun} {listed}; known global tools: {known_text}"
            )
        restriction = Restriction(
            allow=frozenset(allow_names) if allow_names is not None else None,
            deny=frozenset(deny_names) if deny_names is not None else None,
        )
        layer = self._layer()
        layer.restrictions.append(restriction)

        def undo() -> None:
            if restriction in layer.restrictions:
                layer.restrictions.remove(restriction)

        return self._commit(layer, undo, emit=True)

    def present_as(self, mode: str) -> Disposer:
        """Declare this scope's presentation mode (``native``, ``code`` or ``both``)."""
        if self._key is None:
            raise ValueError(_PRESENT_UNSCOPED)
        self._check_live()
        if mode not in MODES:
            raise ValueError('present_as() mode must be one of "native", "code", "both"')
        layer = self._layer()
        if layer.mode is not None:
            raise ValueError(
                f'present_as("{mode}") conflicts with "{layer.mode}" already declared for this '
                "scope; one composition selects one presentation"
            )
        layer.mode = mode

        def undo() -> None:
            layer.mode = None

        return self._commit(layer, undo, emit=True)

    # ------------------------------------------------------------------ policies
    def guard(self, fn: Callable[[Any], str | None]) -> Disposer:
        """Add a monotonic guard: ``None`` abstains, any ``str`` denies (no change event)."""
        if not callable(fn):
            raise TypeError("guard() takes a callable")
        layer = self._layer()
        entry = GuardEntry(fn)
        layer.add_guard(entry)
        return self._commit(layer, lambda: layer.remove_guard(entry), emit=False)

    def _hook(self, kind: HookKind, fn: Callable[..., Any], prepend: bool) -> Disposer:
        if not callable(fn):
            raise TypeError(f"a {kind} hook must be callable")
        layer = self._layer()
        hook = Hook(fn)
        hooks = layer.hooks[kind]
        if prepend:
            hooks.insert(0, hook)
        else:
            hooks.append(hook)

        def undo() -> None:
            if hook in layer.hooks[kind]:
                layer.hooks[kind].remove(hook)

        return self._commit(layer, undo, emit=False)

    def on_pre_execute(self, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """``async (execution, next) -> PreToolDecision``; the first registered is outermost."""
        return self._hook("pre", listener, prepend)

    def on_execute(self, wrapper: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """``async (dispatch_execution, next) -> ToolExecutionResult`` around the body."""
        return self._hook("execute", wrapper, prepend)

    def on_post_execute(self, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """``async (execution, result, next) -> PostToolDecision``."""
        return self._hook("post", listener, prepend)

    def on_result(self, observer: Callable[..., Any]) -> Disposer:
        """``(execution, result) -> None``, sync or async; failures are contained."""
        return self._hook("result", observer, False)

    def on_dispatch_log(self, listener: Callable[..., Any], *, prepend: bool = False) -> Disposer:
        """The Code Mode sub-call log waterfall."""
        return self._hook("dispatch_log", listener, prepend)

    def on_change(self, listener: Callable[[], Any]) -> Disposer:
        """``() -> None`` after every registration change, never scope-filtered (R-EVT-08)."""
        if not callable(listener):
            raise TypeError("on_change() takes a callable")
        self._check_live()
        return self._own(Disposer(self._state.add_change_listener(listener)))

    def _check_live(self) -> None:
        """Raise if this layer can take no contribution (a disposed scope)."""

    def set_executor(self, executor: Any) -> Disposer:
        """Select the batch executor for this layer (global = the deployment default)."""
        if not callable(getattr(executor, "execute", None)):
            raise TypeError(
                "set_executor() takes a ToolExecutor (an object with an async "
                f"execute(batch)), not {type(executor).__name__}"
            )
        layer = self._layer()
        layer.executors.append(executor)
        if self._key is None:
            self._state.default_replaced = True

        def undo() -> None:
            if executor in layer.executors:
                layer.executors.remove(executor)

        return self._commit(layer, undo, emit=False)


class ScopedTools(WriteSide):
    """The handle of one agent scope: its own layer on top of its chain."""

    def __init__(self, state: RegistryState, key: str, forget: Callable[[str], None]) -> None:
        super().__init__(state, key)
        self._owned: list[Disposer] = []
        self._disposed = False
        self._forget = forget

    @property
    def key(self) -> str:
        """The scope key."""
        assert self._key is not None
        return self._key

    @property
    def parent(self) -> str | None:
        """The parent scope key, if any."""
        return self._state.parent_of(self.key)

    @property
    def disposed(self) -> bool:
        """Whether :meth:`dispose` has run."""
        return self._disposed

    def _own(self, disposer: Disposer) -> Disposer:
        self._owned.append(disposer)
        return disposer

    def _check_live(self) -> None:
        if self._disposed:
            raise RuntimeError(f'scope "{self.key}" is disposed')

    def _layer(self) -> Layer:
        self._check_live()
        return super()._layer()

    def dispose(self) -> None:
        """Unwind everything registered through this scope, last first; forget the scope."""
        if self._disposed:
            return
        self._disposed = True
        while self._owned:
            self._owned.pop()()
        self._forget(self.key)

    def __repr__(self) -> str:
        return f"<ScopedTools {self.key!r} parent={self.parent!r}>"


class Scopes:
    """The scope handles of one registry: created on first use, forgotten on dispose."""

    def __init__(self, state: RegistryState, disposed: Callable[[str], None] | None = None) -> None:
        self._state = state
        self._contexts: dict[str, ScopedTools] = {}
        self._disposed = disposed

    def scope(self, key: str, parent: str | None = None) -> ScopedTools:
        """The handle of scope ``key`` (created on first use, with ``parent``'s chain)."""
        if not isinstance(key, str):
            raise TypeError("a scope key is a str")
        self._state.open_scope(key, parent)
        context = self._contexts.get(key)
        if context is None:
            context = self._contexts[key] = ScopedTools(self._state, key, self._forget)
        return context

    def _forget(self, key: str) -> None:
        self._contexts.pop(key, None)
        self._state.close_scope(key)
        if self._disposed is not None:  # its environment instances close with it
            self._disposed(key)
