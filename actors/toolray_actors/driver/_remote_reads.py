"""The read side ``RemoteRegistry`` holds: every registry read, answered by the registry actor.

Arguments and results are the core's: ``get`` / ``executable`` /
``definitions`` return definitions (unpickled here from the blobs they were registered
with, so equal but not identical to the driver's objects, R-REG-14 aside), ``schemas`` the
detached projections, ``execution_mode`` the core classification, ``check_guards`` the
first denial (guards run in the registry actor), ``statistics`` the core
``RegistryStatistics``. Each takes ``scope=`` and ``tool_set=`` where the core does; a
``tool_set`` is a :class:`~toolray_actors._toolset.RemoteToolSet` from :meth:`resolve`.
``get("run_code")`` gives the one shared transport object whenever the scope presents
Code Mode. Batches and single calls go to the scope's executor actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolray import (
    ActivationContext,
    RegistryStatistics,
    ToolBatchInput,
    ToolBatchResult,
    ToolDefinition,
    ToolExecution,
    ToolExecutionInput,
    ToolExecutionResult,
)
from toolray_actors._toolset import RemoteToolSet, wire_tool_set
from toolray_actors._wire import ExecutionSnapshot, definition_of, shippable_arguments
from toolray_actors.control._registry_actor import RegistryActor
from toolray_actors.control._store import RegistryInfo

from ._connection import Connection
from ._executor_handle import ExecutorHandle

__all__ = ("RemoteReads",)


def _check_name(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"a tool name is a str, not {type(name).__name__}")


class RemoteReads:
    """Reads of the namespace's registry actor, and calls sent to the scopes' executors.

    ``RemoteRegistry`` holds one and delegates its read API to it.
    """

    def __init__(self, conn: Connection, executors: Callable[[str | None], ExecutorHandle]) -> None:
        self._conn = conn
        self._executors = executors

    # ------------------------------------------------------------------ visibility
    def get(
        self, name: str, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition ``scope`` sees under ``name`` (``run_code`` when presented)."""
        _check_name(name)
        return definition_of(
            self._conn.call(RegistryActor.read_get, name, scope, wire_tool_set(tool_set))
        )

    def executable(
        self, name: str, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> ToolDefinition | None:
        """The definition a call may execute: the step's set decides, else unconditional."""
        _check_name(name)
        blob = self._conn.call(RegistryActor.read_executable, name, scope, wire_tool_set(tool_set))
        return definition_of(blob)

    def definitions(
        self, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> list[ToolDefinition]:
        """The visible capability definitions (never ``run_code``), in view order."""
        blobs = self._conn.call(RegistryActor.read_definitions, scope, wire_tool_set(tool_set))
        return [d for d in map(definition_of, blobs) if d is not None]

    def schemas(
        self, scope: str | None = None, tool_set: RemoteToolSet | None = None
    ) -> list[dict[str, Any]]:
        """One detached ``{"name", "description", "parameters"}`` per visible tool."""
        return list(self._conn.call(RegistryActor.schemas, scope, wire_tool_set(tool_set)))

    def names(self, scope: str | None = None, tool_set: RemoteToolSet | None = None) -> list[str]:
        """Visible capability names, in view order."""
        return list(self._conn.call(RegistryActor.names, scope, wire_tool_set(tool_set)))

    def known_names(self, scope: str | None = None) -> list[str]:
        """R-SCH-11 ``knownNames`` for the scope's wire contribution."""
        return list(self._conn.call(RegistryActor.known_names, scope))

    # ------------------------------------------------------------------ one call
    def execution_mode(self, inp: ToolExecutionInput) -> str:
        """``"parallel"`` only when the visible classifier returns exactly ``True``."""
        if not isinstance(inp, ToolExecutionInput):
            raise TypeError(
                f"execution_mode() takes a ToolExecutionInput, not {type(inp).__name__}"
            )
        return str(
            self._conn.call(
                RegistryActor.execution_mode,
                inp.name,
                shippable_arguments(inp.arguments),
                inp.scope,
                wire_tool_set(inp.tool_set),
                inp.parent is not None,
            )
        )

    def check_guards(self, execution: ToolExecution) -> str | None:
        """Global guards, then the caller's chain farthest first; the first ``str`` denies."""
        if not isinstance(execution, ToolExecution):
            raise TypeError(f"check_guards() takes a ToolExecution, not {type(execution).__name__}")
        snapshot = ExecutionSnapshot.of(execution, wire_tool_set(execution.tool_set))
        verdict = self._conn.call(RegistryActor.check_guards, snapshot)
        return None if verdict is None else str(verdict)

    def stats(self) -> RegistryStatistics:
        """The authoritative registry's counts (scopes, layers, tools, views)."""
        stats: RegistryStatistics = self._conn.call(RegistryActor.statistics)
        return stats

    # ------------------------------------------------------------------ steps and calls
    async def resolve(self, context: ActivationContext) -> RemoteToolSet:
        """Evaluate every ``when`` visible to the scope, in its executor actor, once.

        Returns the step's set for ``ToolBatchInput(tool_set=...)``. A raising condition
        raises that exception (the first in registration order); an abort of
        ``context.signal`` before or during resolution raises ``AbortError`` (or the
        reason, if it is an exception) and publishes nothing.
        """
        if not isinstance(context, ActivationContext):
            raise TypeError(f"resolve() takes an ActivationContext, not {type(context).__name__}")
        return await self._executors(context.scope).resolve(context)

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Run ``batch`` on its scope's executor actor (``rt.executor(batch.scope)``)."""
        if not isinstance(batch, ToolBatchInput):
            raise TypeError(f"execute_batch() takes a ToolBatchInput, not {type(batch).__name__}")
        return await self._executors(batch.scope).execute_batch(batch)

    async def execute(
        self, inp: ToolExecutionInput, *, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        """Run one call through its scope's executor actor (the core ``execute()``)."""
        if not isinstance(inp, ToolExecutionInput):
            raise TypeError(f"execute() takes a ToolExecutionInput, not {type(inp).__name__}")
        return await self._executors(inp.scope).execute(inp, deadline_s=deadline_s)

    def info(self) -> RegistryInfo:
        """Registry counters (contributions, sequence, executors, restarts, leases, scopes)."""
        return self._conn.call(RegistryActor.info)
