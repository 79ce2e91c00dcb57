"""``RemoteToolSet``: a step's admitted set resolved by an executor actor, carried by value.

``await rt.registry.resolve(ActivationContext(...))`` evaluates every ``when`` in the scope's
executor actor (where the calls run) and returns which registrations were admitted, by
contribution id — ids every mirror of the namespace shares. The set is therefore a value:
any executor (a recreated one, another shard) rebuilds the same core ``ResolvedToolSet``
over its own mirror, with the core's semantics: a registration disposed, replaced by the
same name or hidden by a new restriction drops out, nothing registered later is admitted,
and another scope sees nothing. ``dispose()`` closes admission for every later use of this
object (a batch already sent keeps the copy it carried).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, final

from toolray import AbortError, AbortSignal, ResolvedToolSet, ToolDefinition
from toolray.lowlevel import chain_entries, tool_set_of
from toolray_actors._wire import DefinitionBlob, definition_of

if TYPE_CHECKING:
    from toolray_actors._mirror import Mirror

__all__ = ("RemoteToolSet", "core_tool_set", "raise_if_aborted", "wire_tool_set")


class ViewSource(Protocol):
    """What a remote set asks of its connection: the admitted definitions still in view."""

    def tool_set_view(self, tool_set: RemoteToolSet) -> list[tuple[str, DefinitionBlob]]:
        """``(name, blob)`` in view order."""
        ...


@final
class RemoteToolSet(ResolvedToolSet):
    """One step's admitted registrations for one scope, as the Ray runtime carries them.

    A ``ResolvedToolSet`` (``scope``, ``view``, ``dispose``, ``disposed``, a context
    manager) whose admission is a set of contribution ids instead of a live registry.
    """

    __slots__ = ("_conn", "_ids")

    def __init__(
        self, scope: str | None, ids: Iterable[int], conn: ViewSource | None = None
    ) -> None:
        self._scope = scope
        self._ids = frozenset(ids)
        self._disposed = False
        self._conn = conn
        self._state = None  # type: ignore[assignment]  # a remote set holds no state
        self._admitted: set[int] = set()
        self._cache = None

    @property
    def ids(self) -> frozenset[int]:
        """The admitted registrations, by contribution id."""
        return frozenset() if self._disposed else self._ids

    def admits(self, entry: object) -> bool:
        """Registrations of a live registry are never this set's (it admits by id)."""
        return False

    def entry(self, scope: str | None, name: str) -> Any:
        """The admitted definition ``scope`` still sees under ``name``, if any."""
        return self.view(scope).get(name)

    def view(self, scope: str | None) -> Mapping[str, ToolDefinition]:
        """Admitted definitions still visible in ``scope`` (unpickled here), in view order."""
        if self._disposed or scope != self._scope or self._conn is None:
            return {}
        found = ((name, definition_of(blob)) for name, blob in self._conn.tool_set_view(self))
        return {name: definition for name, definition in found if definition is not None}

    def entries(self, scope: str | None) -> Mapping[str, Any]:  # type: ignore[override]
        """The ``ToolSet`` protocol's registrations: here, the admitted definitions."""
        return self.view(scope)

    def __reduce__(
        self,
    ) -> tuple[Callable[[str | None, tuple[int, ...], bool], RemoteToolSet], tuple[object, ...]]:
        return (_restore, (self._scope, tuple(sorted(self._ids)), self._disposed))

    def __repr__(self) -> str:
        state = "disposed" if self._disposed else f"{len(self._ids)} admitted"
        return f"<RemoteToolSet scope={self._scope!r} {state}>"


def _restore(scope: str | None, ids: tuple[int, ...], disposed: bool) -> RemoteToolSet:
    tool_set = RemoteToolSet(scope, ids)
    tool_set._disposed = disposed
    return tool_set


def wire_tool_set(tool_set: object) -> RemoteToolSet | None:
    """``tool_set`` as it may travel to an actor; an in-process set is a ``TypeError``."""
    if tool_set is None or isinstance(tool_set, RemoteToolSet):
        return tool_set
    raise TypeError(
        "the Ray runtime takes a tool set from `await rt.registry.resolve(...)`, not "
        f"{type(tool_set).__name__} (an in-process ResolvedToolSet cannot cross processes)"
    )


def core_tool_set(mirror: Mirror, wired: ResolvedToolSet | None) -> ResolvedToolSet | None:
    """The core set ``wired`` (a ``RemoteToolSet``) stands for, over ``mirror``'s registry."""
    tool_set = wire_tool_set(wired)
    if tool_set is None:
        return None
    registry = mirror.registry
    ids = tool_set.ids
    admitted = [
        e for e in chain_entries(registry, tool_set.scope) if mirror.op_id_of(e.definition) in ids
    ]
    core = tool_set_of(registry, tool_set.scope, admitted)
    if tool_set.disposed:
        core.dispose()
    return core


def raise_if_aborted(signal: AbortSignal) -> None:
    """The core's ``resolve()`` abort: the reason if it is an exception, else ``AbortError``."""
    if signal.aborted:
        reason = signal.reason
        if isinstance(reason, BaseException):
            raise reason
        raise AbortError("tool resolution was aborted")
