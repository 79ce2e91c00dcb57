"""The registry actor's read side and its change counter (a component ``RegistryActor`` holds).

Every read answers from the actor's authoritative core ``ToolRegistry`` (a mirror of the
live contributions), so results, order and messages are the core's. Definitions travel as
the blobs they were registered with; ``run_code`` as a pickle of the core transport. A
step's set arrives by value (``RemoteToolSet``) and is rebuilt over this mirror.

Change events: a core ``on_change`` listener on the mirror counts every committed change
with the core's rules (one per registration, restriction or mode and per disposal of one,
one for a swap, none for guards, hooks or an idempotent re-registration; R-EVT). Drivers
long-poll :meth:`RegistryReader.wait_changes` and run their listeners once per change.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import cloudpickle

from toolray import (
    RESERVED_TOOL_NAME,
    AbortController,
    ExecutionToken,
    RegistryStatistics,
    ResolvedToolSet,
    ToolDefinition,
    ToolExecutionInput,
)
from toolray_actors._mirror import Mirror
from toolray_actors._toolset import RemoteToolSet, core_tool_set
from toolray_actors._wire import DefinitionBlob, ExecutionSnapshot, RunCodeBlob

__all__ = ("RegistryReader",)

"""First item of a ``("run_code", blob)`` answer: the definition is the shared transport."""

_MAX_POLL_S = 30.0


class RegistryReader:
    """Reads of the authoritative registry (``mirror``), and its change counter.

    The registry actor holds one; its read methods delegate here.
    """

    def __init__(self, mirror: Mirror) -> None:
        self.mirror = mirror
        self.changes = 0
        """How many changes the registry has committed (restored with its state)."""
        self._change_event = asyncio.Event()

    # ------------------------------------------------------------------ change events
    def count_changes(self) -> None:
        """Count every change the registry commits from now on (after the restore)."""
        self.mirror.registry.on_change(self._changed)

    def _changed(self) -> None:
        self.changes += 1
        event, self._change_event = self._change_event, asyncio.Event()
        event.set()

    async def change_count(self) -> int:
        """How many changes the registry has committed (it survives restarts)."""
        return self.changes

    async def wait_changes(self, seen: int, timeout_s: float) -> int:
        """The change count, once it differs from ``seen`` (or after ``timeout_s``)."""
        if self.changes == seen:
            event = self._change_event
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(max(timeout_s, 0.0), _MAX_POLL_S))
        return self.changes

    # ------------------------------------------------------------------ helpers
    def _set(self, tool_set: ResolvedToolSet | None) -> ResolvedToolSet | None:
        return core_tool_set(self.mirror, tool_set)

    def _blob(self, definition: ToolDefinition | None) -> DefinitionBlob:
        """The registered blob of ``definition``, the ``run_code`` transport's, or ``None``."""
        if definition is None:
            return None
        found = self.mirror.key_of(definition)
        if found is not None:
            _, blob = found
            return blob
        if definition.name == RESERVED_TOOL_NAME:
            return RunCodeBlob(bytes(cloudpickle.dumps(definition)))
        return None

    # ------------------------------------------------------------------ reads
    async def read_get(
        self, name: str, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> DefinitionBlob:
        """``get(name, scope, tool_set)``: the definition's blob, or ``None``."""
        return self._blob(self.mirror.registry.get(name, scope, self._set(tool_set)))

    async def read_executable(
        self, name: str, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> DefinitionBlob:
        """``executable(name, scope, tool_set)``: the definition's blob, or ``None``."""
        return self._blob(self.mirror.registry.executable(name, scope, self._set(tool_set)))

    async def read_definitions(
        self, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> list[DefinitionBlob]:
        """``definitions(scope, tool_set)``: blobs in view order."""
        found = self.mirror.registry.definitions(scope, self._set(tool_set))
        return [self._blob(d) for d in found]

    async def tool_set_view(self, tool_set: RemoteToolSet) -> list[tuple[str, DefinitionBlob]]:
        """``tool_set.view(tool_set.scope)``: ``(name, blob)`` in view order."""
        core = self._set(tool_set)
        view = core.view(tool_set.scope) if core is not None else {}
        return [(name, self._blob(d)) for name, d in view.items()]

    async def schemas(
        self, scope: str | None, tool_set: RemoteToolSet | None = None
    ) -> list[dict[str, Any]]:
        """``schemas(scope, tool_set)`` of the authoritative registry."""
        return self.mirror.registry.schemas(scope, self._set(tool_set))

    async def names(self, scope: str | None, tool_set: RemoteToolSet | None = None) -> list[str]:
        """Visible capability names, in view order."""
        return [d.name for d in self.mirror.registry.definitions(scope, self._set(tool_set))]

    async def known_names(self, scope: str | None) -> list[str]:
        """R-SCH-11 known names for the scope."""
        return self.mirror.registry.known_names(scope)

    async def execution_mode(
        self,
        name: str,
        arguments: object,
        scope: str | None,
        tool_set: RemoteToolSet | None,
        nested: bool,
    ) -> str:
        """``execution_mode`` of one call, classified by the registered definition here."""
        inp = ToolExecutionInput(
            "execution-mode",
            name,
            arguments,
            AbortController().signal,
            scope=scope,
            tool_set=self._set(tool_set),
            parent=ExecutionToken() if nested else None,
        )
        return self.mirror.registry.execution_mode(inp)

    async def check_guards(self, snapshot: ExecutionSnapshot) -> str | None:
        """``check_guards`` over an execution rebuilt from ``snapshot`` (guards run here)."""
        execution = snapshot.rebuild(self._set(snapshot.tool_set))
        return self.mirror.registry.check_guards(execution)

    async def statistics(self) -> RegistryStatistics:
        """The authoritative registry's ``RegistryStatistics``."""
        return self.mirror.registry.stats()
