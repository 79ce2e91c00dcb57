"""``ToolRegistry``: the global layer, the scope tree, and the read side.

Views are cached per scope and per registration selection; a cached view is reused while
the versions of every layer on the scope's chain are unchanged (a registry-wide epoch makes
the common "nothing changed" check O(1)). The original rebuilds on every read.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, final

from ._clock import Clock, system_clock
from ._context import ScopedTools, WriteSide
from ._definition import RESERVED_TOOL_NAME, ToolDefinition
from ._disposer import Disposer
from ._json import snapshot_json, thaw_json
from ._layers import Entry, Layer
from ._schema import compile_validator
from ._transport import RUN_CODE
from ._view import build_view, restrictable_names
from .errors import ExecutorUnavailableError, NotJsonError

if TYPE_CHECKING:
    from ._admission import ResolvedToolSet
    from ._batch_types import ToolBatchInput, ToolBatchResult, ToolExecutor
    from ._execution import ToolExecution, ToolExecutionInput
    from ._results import ActivationContext, ApprovalService, ToolExecutionResult

__all__ = (
    "MODES",
    "ExecutionMode",
    "RegistryStatistics",
    "ToolRegistry",
    "has_scope",
    "scope_parent",
)

_log = logging.getLogger("toolray")

MODES = ("native", "code", "both")
ExecutionMode = Literal["parallel", "exclusive"]
Variant = Literal["all", "unconditional"]


def _all(entry: Entry) -> bool:
    return True


def _unconditional(entry: Entry) -> bool:
    return entry.when is None


RUN_CODE_ENTRY = Entry(definition=RUN_CODE, when=None, layer_key=None)


def _projected_parameters(entry: Entry) -> Any:
    """The entry's parameters as a frozen snapshot, made once (R-SCH-03/05)."""
    snap = entry.parameters_snapshot
    if snap is None:
        try:
            snap = snapshot_json(entry.definition.parameters)
        except NotJsonError:
            raise ValueError(
                f'tool "{entry.definition.name}" parameters must be lossless JSON before schema '
                "projection"
            ) from None
        entry.parameters_snapshot = snap
    return snap


_INCLUDE: dict[str, Callable[[Entry], bool]] = {"all": _all, "unconditional": _unconditional}
_STRANGER_VIEWS = 256  # cached views of keys read without a scope() (bounded, oldest evicted)


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
class ToolRegistry(WriteSide):
    """The tool registry: global layer, scopes, visibility and the per-call pipeline.

    Example:
        >>> from toolray import ToolRegistry, define_tool, ToolOutput, text_block
        >>> reg = ToolRegistry()
        >>> echo = define_tool(
        ...     name="echo", description="Echo", parameters={},
        ...     output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        ...     execute=lambda args, ctx: "hi",
        ... )
        >>> dispose = reg.register(echo)
        >>> [s["name"] for s in reg.schemas()]
        ['echo']
    """

    def __init__(self, *, mode: str = "native", clock: Clock | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f'mode must be one of "native", "code", "both" (got {mode!r})')
        self.mode = mode
        self.clock: Clock = clock if clock is not None else system_clock
        self._layers: dict[str | None, Layer] = {None: Layer(None)}
        self._parents: dict[str, str | None] = {}
        self._children: dict[str, int] = {}  # how many scopes name each key as their parent
        self._scopes: dict[str, ScopedTools] = {}
        self._change_listeners: list[Callable[[], Any]] = []
        self._epoch = 0
        self._cache: dict[
            tuple[str | None, str], tuple[int, tuple[int, ...], dict[str, Entry]]
        ] = {}
        self._strangers: dict[tuple[str | None, str], None] = {}
        self._approval: list[ApprovalService] = []
        self._default_executor: ToolExecutor | None = None
        self._default_replaced = False
        self._chains: dict[str, tuple[str, ...]] = {}
        super().__init__(self, None)

    def statistics(self) -> RegistryStatistics:
        """Counts of scopes, live layers (empty ones are reclaimed), tools and the cache."""
        layers = list(self._layers.values())
        return RegistryStatistics(
            scopes=len(self._scopes),
            layers=len(layers),
            tools=sum(len(layer.tools) for layer in layers),
            restrictions=sum(len(layer.restrictions) for layer in layers),
            guards=sum(sum(g.active for g in layer.guards) for layer in layers),
            epoch=self._epoch,
            cached_views=len(self._cache),
        )

    # ------------------------------------------------------------------ scopes
    def scope(self, key: str, *, parent: str | None = None) -> ScopedTools:
        """The scoped context of ``key`` (created on first use, with ``parent``'s chain)."""
        if not isinstance(key, str):
            raise TypeError("a scope key is a str")
        existing = self._scopes.get(key)
        if existing is not None:
            if parent is not None and self._parents.get(key) != parent:
                raise ValueError(
                    f'scope "{key}" already has parent {self._parents.get(key)!r}, not {parent!r}'
                )
            return existing
        if parent is not None:
            if parent == key or key in self.chain(parent):
                raise ValueError(f'scope parent "{parent}" would make a cycle through "{key}"')
            if parent not in self._scopes:
                self.scope(parent)
        previous = self._parents.get(key)
        if previous is not None:
            self._children[previous] -= 1
        if parent is not None:
            self._children[parent] = self._children.get(parent, 0) + 1
        self._parents[key] = parent
        self._chains.clear()
        self._epoch += 1  # a new chain changes what the key sees (R-VIS-32), with no event
        scoped = ScopedTools(self, key)
        self._scopes[key] = scoped
        return scoped

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
        if key in self._parents:  # only known scopes are cached (parents never change)
            self._chains[key] = chain
        return chain

    def _forget_scope(self, key: str) -> None:
        """Drop a disposed scope: its context, cached views, chain and parent binding.

        The parent binding stays while a live scope still inherits through it.
        """
        self._scopes.pop(key, None)
        node: str | None = key
        while node is not None and node not in self._scopes and not self._children.get(node):
            parent = self._parents.pop(node, None)
            self._children.pop(node, None)
            for variant in _INCLUDE:
                self._cache.pop((node, variant), None)
            if parent is not None:
                self._children[parent] -= 1
            node = parent
        self._chains.clear()
        self._epoch += 1

    # ------------------------------------------------------------------ layer plumbing
    def _layer_of(self, key: str | None, *, create: bool = False) -> Layer | None:
        layer = self._layers.get(key)
        if layer is None and create:
            layer = self._layers[key] = Layer(key)
        return layer

    def _touch(self, layer: Layer) -> None:
        layer.version += 1
        self._epoch += 1
        if layer.key is not None and layer.empty:
            self._layers.pop(layer.key, None)

    def _emit_change(self) -> None:
        for listener in list(self._change_listeners):
            listener()

    def _emit_change_contained(self) -> None:
        try:
            self._emit_change()
        except Exception:
            _log.exception("toolray: an on_change listener raised during a disposal")

    # ------------------------------------------------------------------ views
    def _chain_layers(self, scope: str | None) -> tuple[list[Layer | None], Layer | None]:
        keys = self.chain(scope)
        layers = [self._layers.get(k) for k in keys]
        if not keys:
            return [], self._layers[None]
        return layers[:-1], layers[-1]

    def _versions(self, scope: str | None) -> tuple[int, ...]:
        layers = [self._layers.get(k) for k in self.chain(scope)]
        glob = self._layers[None]
        return (
            id(glob),
            glob.version,
            *(id(la) if la else 0 for la in layers),
            *(la.version if la else -1 for la in layers),
        )

    def _entries(self, scope: str | None, variant: Variant = "all") -> dict[str, Entry]:
        key = (scope, variant)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == self._epoch:
            return cached[2]
        versions = self._versions(scope)
        if cached is not None and cached[1] == versions:
            self._cache[key] = (self._epoch, versions, cached[2])
            return cached[2]
        view = self._build(scope, _INCLUDE[variant])
        self._cache[key] = (self._epoch, versions, view)
        if scope is not None and scope not in self._parents:
            self._remember_stranger(key)
        return view

    def _remember_stranger(self, key: tuple[str | None, str]) -> None:
        """Views of keys that are no scope (reads never create one) stay few: oldest go."""
        strangers = self._strangers
        strangers[key] = None
        if len(strangers) > _STRANGER_VIEWS:
            oldest = next(iter(strangers))
            del strangers[oldest]
            self._cache.pop(oldest, None)

    def _build(self, scope: str | None, include: Callable[[Entry], bool]) -> dict[str, Entry]:
        if scope is None:
            return {n: e for n, e in self._layers[None].tools.items() if include(e)}
        ancestors, own = self._chain_layers(scope)
        return build_view(self._layers[None], ancestors, own, include)

    def effective_mode(self, scope: str | None) -> str:
        """The nearest ``present_as`` on the chain (scope first), else the deployment mode."""
        if scope is None:
            return self.mode
        for key in reversed(self.chain(scope)):
            layer = self._layers.get(key)
            if layer is not None and layer.mode is not None:
                return layer.mode
        return self.mode

    def _definitions_view(
        self, scope: str | None, tool_set: ResolvedToolSet | None, variant: Variant
    ) -> dict[str, ToolDefinition]:
        if tool_set is not None:
            return dict(tool_set.view(scope))
        return {name: e.definition for name, e in self._entries(scope, variant).items()}

    def _restrictable(self, scope: str) -> set[str]:
        ancestors, _ = self._chain_layers(scope)
        return restrictable_names(self._layers[None], ancestors)

    # ------------------------------------------------------------------ read side
    def get(
        self, name: str, scope: str | None = None, tool_set: ResolvedToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition ``scope`` sees under ``name`` (``run_code`` when presented)."""
        if name == RESERVED_TOOL_NAME:
            return RUN_CODE if self.effective_mode(scope) != "native" else None
        if tool_set is not None:
            return tool_set.view(scope).get(name)
        entry = self._entries(scope).get(name)
        return entry.definition if entry is not None else None

    def executable(
        self, name: str, scope: str | None = None, tool_set: ResolvedToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition a call may execute: the step's set decides, else unconditional only."""
        entry = self._executable_entry(name, scope, tool_set)
        return entry.definition if entry is not None else None

    def _executable_entry(
        self, name: str, scope: str | None, tool_set: ResolvedToolSet | None
    ) -> Entry | None:
        if name == RESERVED_TOOL_NAME:
            return RUN_CODE_ENTRY if self.effective_mode(scope) != "native" else None
        if tool_set is not None:
            return tool_set.entry(scope, name)
        return self._entries(scope, "unconditional").get(name)

    def definitions(
        self, scope: str | None = None, tool_set: ResolvedToolSet | None = None
    ) -> list[ToolDefinition]:
        """The visible capability definitions (never ``run_code``), in view order."""
        return list(self._definitions_view(scope, tool_set, "all").values())

    def schemas(
        self, scope: str | None = None, tool_set: ResolvedToolSet | None = None
    ) -> list[dict[str, Any]]:
        """One detached ``{"name", "description", "parameters"}`` per visible tool."""
        entries = list(
            tool_set.entries(scope).values()
            if tool_set is not None
            else self._entries(scope).values()
        )
        if self.effective_mode(scope) != "native":
            entries.append(RUN_CODE_ENTRY)
        out = []
        for entry in entries:
            definition = entry.definition
            out.append(
                {
                    "name": definition.name,
                    "description": definition.description,
                    "parameters": thaw_json(_projected_parameters(entry)),
                }
            )
        return out

    def known_names(self, scope: str | None = None) -> list[str]:
        """R-SCH-11 ``knownNames`` for the scope's wire contribution."""
        mode = self.effective_mode(scope)
        if mode == "code":
            return [RESERVED_TOOL_NAME]
        names: dict[str, None] = {}
        for key in (None, *self.chain(scope)):
            layer = self._layers.get(key)
            if layer is not None:
                names.update(dict.fromkeys(layer.tools))
        return [*names, RESERVED_TOOL_NAME] if mode == "both" else list(names)

    def execution_mode(self, inp: ToolExecutionInput) -> ExecutionMode:
        """``"parallel"`` only when the visible classifier returns exactly ``True``."""
        entry = self.resolve_entry(inp.name, inp.scope, inp.tool_set, inp.parent)
        classify = entry.definition.is_concurrency_safe if entry is not None else None
        if classify is None:
            return "exclusive"
        try:
            verdict = classify(inp.arguments)
        except Exception:
            return "exclusive"
        return "parallel" if verdict is True else "exclusive"

    def resolve_entry(
        self, name: str, scope: str | None, tool_set: ResolvedToolSet | None, parent: Any
    ) -> Entry | None:
        """The entry a call executes now (collapse and ``run_code`` included)."""
        if self.is_collapsed(name, scope, parent):
            return None
        return self._executable_entry(name, scope, tool_set)

    @staticmethod
    def output_check(entry: Entry) -> Callable[[Any], list[str]]:
        """The entry's compiled output validator (compiled once, on first use)."""
        check = entry.output_check
        if check is None:
            check = entry.output_check = compile_validator(entry.definition.output.schema)
        return check

    def is_collapsed(self, name: str, scope: str | None, parent: Any) -> bool:
        """Whether a call is refused by the Code Mode collapse (R-COND-09)."""
        return (
            parent is None and name != RESERVED_TOOL_NAME and self.effective_mode(scope) == "code"
        )

    def check_guards(self, execution: ToolExecution) -> str | None:
        """Global guards, then the caller's chain farthest first; the first ``str`` denies."""
        for key in (None, *self.chain(execution.scope)):
            layer = self._layers.get(key)
            if layer is not None and layer.guards:
                verdict = layer.first_denial(execution)
                if verdict is not None:
                    return verdict
        return None

    def hooks(self, kind: str, scope: str | None) -> list[Any]:
        """The hooks of ``kind`` a call from ``scope`` runs: the global ones, then its own.

        A scoped listener sees only its own scope's calls (API.md §6).
        """
        glob = self._layers[None].hooks[kind]  # type: ignore[index]
        own = self._layers.get(scope) if scope is not None else None
        if own is None or not own.hooks[kind]:  # type: ignore[index]
            return [h.fn for h in glob] if glob else []
        return [h.fn for h in glob] + [h.fn for h in own.hooks[kind]]  # type: ignore[index]

    def set_approval(self, service: ApprovalService) -> Disposer:
        """Mount the approval service that answers ``Ask`` decisions (global only)."""
        if not callable(getattr(service, "request", None)):
            raise TypeError("set_approval() takes an object with an async request(request)")
        self._approval.append(service)

        def dispose() -> None:
            if service in self._approval:
                self._approval.remove(service)

        return Disposer(dispose)

    @property
    def approval(self) -> ApprovalService | None:
        """The mounted approval service, if any."""
        return self._approval[-1] if self._approval else None

    # ------------------------------------------------------------------ conditions
    async def resolve(self, context: ActivationContext) -> ResolvedToolSet:
        """Evaluate every ``when`` visible to the context's scope once, concurrently."""
        from ._admission import resolve_tool_set

        return await resolve_tool_set(self, context)

    # ------------------------------------------------------------------ execution
    async def execute(self, inp: ToolExecutionInput) -> ToolExecutionResult:
        """Run one call through the whole pipeline; always returns one frozen result."""
        from ._pipeline import run_pipeline

        return await run_pipeline(self, inp)

    def executor_for(self, scope: str | None) -> ToolExecutor:
        """The nearest scope's executor up the chain, else the deployment default."""
        for key in reversed(self.chain(scope)):
            layer = self._layers.get(key)
            if layer is not None and layer.executors:
                return layer.executors[-1]  # type: ignore[no-any-return]
        glob = self._layers[None]
        if glob.executors:
            return glob.executors[-1]  # type: ignore[no-any-return]
        if not self._default_replaced:
            if self._default_executor is None:
                from ._batch import BatchExecutor

                self._default_executor = BatchExecutor(self)
            return self._default_executor
        raise ExecutorUnavailableError("no tool executor is available for this scope")

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Delegate a raw model batch to the selected executor."""
        return await self.executor_for(batch.scope).execute(batch)


def has_scope(registry: ToolRegistry, key: str) -> bool:
    """Whether ``key`` is a live scope of ``registry`` (created and not disposed)."""
    return key in registry._scopes


def scope_parent(registry: ToolRegistry, key: str) -> str | None:
    """The parent ``key`` is bound to, or ``None`` (no parent, or no such scope)."""
    return registry._parents.get(key)
