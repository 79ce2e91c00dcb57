"""The read side of a registry: visibility, schemas, classification, guards and hooks.

:class:`ReadSide` answers every question of the :class:`~toolray.registry._lookup.ToolLookup`
protocol (and the inspection API of ``ToolRegistry``) from a
:class:`~toolray.registry._state.RegistryState`; it never changes the state. A step's admitted set
(``tool_set``) is read through the :class:`~toolray._execution.ToolSet` protocol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolray._approval import ApprovalService
from toolray._clock import Clock
from toolray._definition import RESERVED_TOOL_NAME, ToolDefinition
from toolray._execution import ToolExecution, ToolExecutionInput, ToolSet
from toolray._json import snapshot_json, thaw_json
from toolray.environments._definition import EnvironmentDefinition
from toolray.environments._instances import Instances
from toolray.errors import NotJsonError
from toolray.farm._controls import FarmControls
from toolray.scheduler._plan import ExecutionMode
from toolray.schema import compile_validator

from ._layers import Entry, HookKind
from ._state import RegistryState, Variant

__all__ = ("ReadSide",)


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


class ReadSide:
    """What one registry shows: implements ``ToolLookup`` over a ``RegistryState``."""

    def __init__(self, state: RegistryState) -> None:
        self._state = state

    @property
    def mode(self) -> str:
        """The deployment presentation mode (``native``, ``code`` or ``both``)."""
        return self._state.mode

    @property
    def clock(self) -> Clock:
        """The clock deadlines and traces run on."""
        return self._state.clock

    @property
    def farm(self) -> FarmControls:
        """The rate limiter and default result bounds every call of this registry obeys."""
        return self._state.farm

    @property
    def approval(self) -> ApprovalService | None:
        """The mounted approval service, if any."""
        approvals = self._state.approvals
        return approvals[-1] if approvals else None

    def chain(self, key: str | None) -> tuple[str, ...]:
        """The scope chain of ``key``, farthest ancestor first, ``key`` last."""
        return self._state.chain(key)

    def effective_mode(self, scope: str | None) -> str:
        """The nearest ``present_as`` on the chain (scope first), else the deployment mode."""
        return self._state.effective_mode(scope)

    def declared_modes(self, scope: str | None) -> list[str]:
        """The ``present_as`` declarations on the scope's chain, farthest first."""
        return [la.mode for la in self._state.layers_on_chain(scope) if la.mode is not None]

    # ------------------------------------------------------------------ visibility
    def _definitions_view(
        self, scope: str | None, tool_set: ToolSet | None, variant: Variant
    ) -> dict[str, ToolDefinition]:
        if tool_set is not None:
            return dict(tool_set.view(scope))
        return {name: e.definition for name, e in self._state.entries(scope, variant).items()}

    @property
    def environments(self) -> Instances:
        """The registry's environment instances (their table, turns and lifecycle)."""
        instances: Instances = self._state.environments
        return instances

    def environment_definition(
        self, name: str, scope: str | None = None
    ) -> EnvironmentDefinition | None:
        """The environment ``scope`` sees under ``name``: its own layer's, else the nearest."""
        found = None
        for layer in self._state.layers_on_chain(scope):
            found = layer.environments.get(name, found)
        return found

    def environment_names(self, scope: str | None = None) -> list[str]:
        """The environments ``scope`` sees, global ones first."""
        names: dict[str, None] = {}
        for layer in self._state.layers_on_chain(scope):
            names.update(dict.fromkeys(layer.environments))
        return list(names)

    def get(
        self, name: str, scope: str | None = None, tool_set: ToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition ``scope`` sees under ``name`` (``run_code`` when presented)."""
        if name == RESERVED_TOOL_NAME:
            state = self._state
            return state.run_code.definition if state.effective_mode(scope) != "native" else None
        if tool_set is not None:
            found: ToolDefinition | None = tool_set.view(scope).get(name)
            return found
        entry = self._state.entries(scope).get(name)
        return entry.definition if entry is not None else None

    def executable(
        self, name: str, scope: str | None = None, tool_set: ToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition a call may execute: the step's set decides, else unconditional only."""
        entry = self._executable_entry(name, scope, tool_set)
        return entry.definition if entry is not None else None

    def _executable_entry(
        self, name: str, scope: str | None, tool_set: ToolSet | None
    ) -> Entry | None:
        if name == RESERVED_TOOL_NAME:
            return self._state.run_code if self._state.effective_mode(scope) != "native" else None
        if tool_set is not None:
            admitted: Entry | None = tool_set.entries(scope).get(name)
            return admitted
        return self._state.entries(scope, "unconditional").get(name)

    def definitions(
        self, scope: str | None = None, tool_set: ToolSet | None = None
    ) -> list[ToolDefinition]:
        """The visible capability definitions (never ``run_code``), in view order."""
        return list(self._definitions_view(scope, tool_set, "all").values())

    def schemas(
        self, scope: str | None = None, tool_set: ToolSet | None = None
    ) -> list[dict[str, Any]]:
        """One detached ``{"name", "description", "parameters"}`` per visible tool."""
        entries: list[Entry] = list(
            tool_set.entries(scope).values()
            if tool_set is not None
            else self._state.entries(scope).values()
        )
        if self._state.effective_mode(scope) != "native":
            entries.append(self._state.run_code)
        return [
            {
                "name": entry.definition.name,
                "description": entry.definition.description,
                "parameters": thaw_json(_projected_parameters(entry)),
            }
            for entry in entries
        ]

    def known_names(self, scope: str | None = None) -> list[str]:
        """R-SCH-11 ``knownNames`` for the scope's wire contribution."""
        mode = self._state.effective_mode(scope)
        if mode == "code":
            return [RESERVED_TOOL_NAME]
        names: dict[str, None] = {}
        for layer in self._state.layers_on_chain(scope):
            names.update(dict.fromkeys(layer.tools))
        return [*names, RESERVED_TOOL_NAME] if mode == "both" else list(names)

    # ------------------------------------------------------------------ one call
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
        self, name: str, scope: str | None, tool_set: ToolSet | None, parent: Any
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
            parent is None
            and name != RESERVED_TOOL_NAME
            and self._state.effective_mode(scope) == "code"
        )

    def check_guards(self, execution: ToolExecution) -> str | None:
        """Global guards, then the caller's chain farthest first; the first ``str`` denies."""
        for layer in self._state.layers_on_chain(execution.scope):
            if layer.guards:
                verdict = layer.first_denial(execution)
                if verdict is not None:
                    return verdict
        return None

    def guarded(self, scope: str | None) -> bool:
        """Whether any guard stands on ``scope``'s chain (the global layer's included)."""
        return any(layer.guards for layer in self._state.layers_on_chain(scope))

    def hooks(self, kind: HookKind, scope: str | None) -> list[Callable[..., Any]]:
        """The hooks of ``kind`` a call from ``scope`` runs: the global ones, then its own.

        A scoped listener sees only its own scope's calls (R-EVT).
        """
        state = self._state
        glob = state.global_layer.hooks[kind]
        own = state.layer(scope) if scope is not None else None
        if own is None or not own.hooks[kind]:
            return [h.fn for h in glob] if glob else []
        return [h.fn for h in glob] + [h.fn for h in own.hooks[kind]]
