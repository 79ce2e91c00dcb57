"""Registry state: the one object that owns layers, the scope tree, the view cache and epoch.

Everything above reads and changes the registry through this small API, never through
private members: the write side (``_context``) takes a layer with :meth:`layer_for_write`,
publishes with :meth:`touch` and :meth:`emit_change`; scopes open and close with
:meth:`open_scope` / :meth:`close_scope`; the read side and admission ask for
:meth:`entries`, :meth:`chain_layers` and :meth:`layers_on_chain`.

Views are cached per scope and per registration selection; a cached view is reused while
the versions of every layer on the scope's chain are unchanged (a registry-wide epoch makes
the common "nothing changed" check O(1)) instead of rebuilding on every read. Closing a
scope drops everything it held (cached views, chain, parent binding), so a long-lived farm
of short-lived scopes keeps a bounded heap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, final

from toolray._approval import ApprovalService
from toolray._clock import Clock
from toolray.farm._controls import FarmControls
from toolray.farm._limiter import LocalRateLimiter

from ._layers import Entry, Layer
from ._view import build_view, restrictable_names

__all__ = ("MODES", "RegistryState", "RegistryStatistics", "Variant")

_log = logging.getLogger("toolray")

MODES = ("native", "code", "both")
Variant = Literal["all", "unconditional"]
_STRANGER_VIEWS = 256  # cached views of keys read without a scope() (bounded, oldest evicted)


def _all(entry: Entry) -> bool:
    return True


def _unconditional(entry: Entry) -> bool:
    return entry.when is None


_INCLUDE: dict[str, Callable[[Entry], bool]] = {"all": _all, "unconditional": _unconditional}

_CacheKey = tuple[str | None, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class RegistryStatistics:
    """A snapshot of a registry's contents and its view cache."""

    scopes: int
    layers: int
    tools: int
    restrictions: int
    guards: int
    epoch: int
    cached_views: int


@final
class RegistryState:
    """Layers, the scope tree, the view cache and the epoch of one registry."""

    __slots__ = (
        "_cache",
        "_chains",
        "_children",
        "_layers",
        "_listeners",
        "_live",
        "_parents",
        "_strangers",
        "approvals",
        "clock",
        "default_replaced",
        "environments",
        "epoch",
        "farm",
        "mode",
        "run_code",
    )

    def __init__(
        self, *, mode: str, clock: Clock, run_code: Entry, farm: FarmControls | None = None
    ) -> None:
        self.mode = mode
        self.clock = clock
        self.farm = farm if farm is not None else FarmControls(rate_limiter=LocalRateLimiter(clock))
        self.run_code = run_code  # the reserved transport's one entry (R-COND-07)
        self.epoch = 0
        self.approvals: list[ApprovalService] = []  # mounted services; the last one answers
        self.default_replaced = False  # a global set_executor replaced the default executor
        self.environments: Any = None  # the registry's ``Instances`` (set by its facade)
        self._layers: dict[str | None, Layer] = {None: Layer(None)}
        self._live: set[str] = set()
        self._parents: dict[str, str | None] = {}
        self._children: dict[str, int] = {}  # how many scopes name each key as their parent
        self._chains: dict[str, tuple[str, ...]] = {}
        self._cache: dict[_CacheKey, tuple[int, tuple[int, ...], dict[str, Entry]]] = {}
        self._strangers: dict[_CacheKey, None] = {}
        self._listeners: list[Callable[[], Any]] = []

    def stats(self) -> RegistryStatistics:
        """Counts of scopes, live layers (empty ones are reclaimed), tools and the cache."""
        layers = list(self._layers.values())
        return RegistryStatistics(
            scopes=len(self._live),
            layers=len(layers),
            tools=sum(len(layer.tools) for layer in layers),
            restrictions=sum(len(layer.restrictions) for layer in layers),
            guards=sum(sum(g.active for g in layer.guards) for layer in layers),
            epoch=self.epoch,
            cached_views=len(self._cache),
        )

    # ------------------------------------------------------------------ layers
    @property
    def global_layer(self) -> Layer:
        """The global layer (always present)."""
        return self._layers[None]

    def layer(self, key: str | None) -> Layer | None:
        """The layer of ``key``, if it holds anything (reads never create layers)."""
        return self._layers.get(key)

    def layer_for_write(self, key: str | None) -> Layer:
        """The layer of ``key``, created for a first contribution (R-REG-18)."""
        layer = self._layers.get(key)
        if layer is None:
            layer = self._layers[key] = Layer(key)
        return layer

    def touch(self, layer: Layer) -> None:
        """Publish a change of ``layer``; an emptied scoped layer is reclaimed."""
        layer.version += 1
        self.epoch += 1
        if layer.key is not None and layer.empty:
            self._layers.pop(layer.key, None)

    def discard_if_empty(self, layer: Layer) -> None:
        """Drop a scoped layer whose first contribution failed (R-REG-18)."""
        if layer.key is not None and layer.empty:
            self._layers.pop(layer.key, None)

    # ------------------------------------------------------------------ change events
    def add_change_listener(self, listener: Callable[[], Any]) -> Callable[[], None]:
        """Add an ``on_change`` listener; returns its remover."""
        listeners = self._listeners
        listeners.append(listener)

        def remove() -> None:
            if listener in listeners:
                listeners.remove(listener)

        return remove

    def emit_change(self) -> None:
        """Call every change listener; the first failure propagates."""
        for listener in list(self._listeners):
            listener()

    def emit_change_contained(self) -> None:
        """Call every change listener during a disposal: a failure is logged, not raised."""
        try:
            self.emit_change()
        except Exception:
            _log.exception("toolray: an on_change listener raised during a disposal")

    # ------------------------------------------------------------------ the scope tree
    def has_scope(self, key: str) -> bool:
        """Whether ``key`` is a live scope (opened and not closed)."""
        return key in self._live

    def parent_of(self, key: str) -> str | None:
        """The parent ``key`` is bound to, if any."""
        return self._parents.get(key)

    def open_scope(self, key: str, parent: str | None) -> None:
        """Open ``key`` (and ``parent``'s chain) on first use; a conflict raises ValueError."""
        if key in self._live:
            if parent is not None and self._parents.get(key) != parent:
                raise ValueError(
                    f'scope "{key}" already has parent {self._parents.get(key)!r}, not {parent!r}'
                )
            return
        if parent is not None:
            if parent == key or key in self.chain(parent):
                raise ValueError(f'scope parent "{parent}" would make a cycle through "{key}"')
            self.open_scope(parent, None)
        previous = self._parents.get(key)
        if previous is not None:
            self._children[previous] -= 1
        if parent is not None:
            self._children[parent] = self._children.get(parent, 0) + 1
        self._parents[key] = parent
        self._live.add(key)
        self._chains.clear()
        self.epoch += 1  # a new chain changes what the key sees (R-VIS-32), with no event

    def close_scope(self, key: str) -> None:
        """Forget a disposed scope: its cached views, chain and parent binding.

        The parent binding stays while a live scope still inherits through it.
        """
        self._live.discard(key)
        node: str | None = key
        while node is not None and node not in self._live and not self._children.get(node):
            parent = self._parents.pop(node, None)
            self._children.pop(node, None)
            for variant in _INCLUDE:
                self._cache.pop((node, variant), None)
            if parent is not None:
                self._children[parent] -= 1
            node = parent
        self._chains.clear()
        self.epoch += 1

    def chain(self, key: str | None) -> tuple[str, ...]:
        """The scope chain of ``key``, farthest ancestor first, ``key`` last."""
        if key is None:
            return ()
        cached = self._chains.get(key)
        if cached is not None:
            return cached
        out: list[str] = []
        node: str | None = key
        while node is not None:
            out.append(node)
            node = self._parents.get(node)
        out.reverse()
        chain = tuple(out)
        if key in self._parents:  # only known scopes are cached
            self._chains[key] = chain
        return chain

    def chain_layers(self, scope: str | None) -> tuple[list[Layer | None], Layer | None]:
        """``(ancestor layers, own layer)`` of ``scope`` (the global layer for ``None``)."""
        keys = self.chain(scope)
        if not keys:
            return [], self._layers[None]
        layers = [self._layers.get(k) for k in keys]
        return layers[:-1], layers[-1]

    def layers_on_chain(self, scope: str | None) -> Iterator[Layer]:
        """The global layer, then every existing layer of ``scope``'s chain, farthest first."""
        yield self._layers[None]
        for key in self.chain(scope):
            layer = self._layers.get(key)
            if layer is not None:
                yield layer

    def restrictable(self, scope: str) -> set[str]:
        """Names ``scope`` inherits before restrictions (what ``restrict()`` may name)."""
        ancestors, _ = self.chain_layers(scope)
        return restrictable_names(self._layers[None], ancestors)

    def effective_mode(self, scope: str | None) -> str:
        """The nearest ``present_as`` on the chain (scope first), else the deployment mode."""
        if scope is None:
            return self.mode
        for key in reversed(self.chain(scope)):
            layer = self._layers.get(key)
            if layer is not None and layer.mode is not None:
                return layer.mode
        return self.mode

    # ------------------------------------------------------------------ views
    def _versions(self, scope: str | None) -> tuple[int, ...]:
        layers = [self._layers.get(k) for k in self.chain(scope)]
        glob = self._layers[None]
        return (
            id(glob),
            glob.version,
            *(id(la) if la else 0 for la in layers),
            *(la.version if la else -1 for la in layers),
        )

    def entries(self, scope: str | None, variant: Variant = "all") -> dict[str, Entry]:
        """The entries ``scope`` sees (``variant`` selects which registrations take part)."""
        key = (scope, variant)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == self.epoch:
            return cached[2]
        versions = self._versions(scope)
        if cached is not None and cached[1] == versions:
            self._cache[key] = (self.epoch, versions, cached[2])
            return cached[2]
        view = self.build(scope, _INCLUDE[variant])
        self._cache[key] = (self.epoch, versions, view)
        if scope is not None and scope not in self._parents:
            self._remember_stranger(key)
        return view

    def build(self, scope: str | None, include: Callable[[Entry], bool]) -> dict[str, Entry]:
        """A fresh view of ``scope`` over the registrations ``include`` selects (R-VIS)."""
        if scope is None:
            return {n: e for n, e in self._layers[None].tools.items() if include(e)}
        ancestors, own = self.chain_layers(scope)
        return build_view(self._layers[None], ancestors, own, include)

    def _remember_stranger(self, key: _CacheKey) -> None:
        """Views of keys that are no scope (reads never create one) stay few: oldest go."""
        strangers = self._strangers
        strangers[key] = None
        if len(strangers) > _STRANGER_VIEWS:
            oldest = next(iter(strangers))
            del strangers[oldest]
            self._cache.pop(oldest, None)
