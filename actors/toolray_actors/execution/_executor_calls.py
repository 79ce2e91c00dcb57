"""The executor actor's single calls: ``execute``, ``resolve`` and nested dispatch.

A component ``ExecutorActor`` holds (its methods of these names delegate here), sharing the
actor's runner and its table of cancellable operations (``batches``: key →
``AbortController``, the key reserved by the driver first, so a forwarded abort finds its
operation).

Nested dispatch is the trust boundary of the Ray layer: a worker names its calling execution
by token id; the runner keeps the executions whose bodies are out on workers, and only
those may dispatch. An unknown id (forged) or a settled one (stale) is rejected with
``ValueError``; a known one runs through the calling context itself, so the nested call
gets its parent, root call id, tool set, scope, signal and default ``<id>:sub:<n>`` id
exactly as in-process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolray import (
    ActivationContext,
    BatchExecutor,
    ModelSelection,
    ResolvedToolSet,
    ToolBatchInput,
    ToolBatchResult,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRunContext,
)
from toolray.lowlevel import Observer, admitted_entries, not_live, run_pipeline
from toolray_actors._ledger import FirstCall
from toolray_actors._mirror import Mirror
from toolray_actors._toolset import core_tool_set
from toolray_actors._wire import CallSpec

from ._reservations import Reservations
from ._runner import RayBodyRunner
from ._streaming import Feed

__all__ = ("CallService",)


class CallService:
    """``execute``, ``resolve`` and ``dispatch_nested`` of one executor actor.

    ``mirror`` gives the actor's current mirror (a resync rebuilds it), ``batches`` and
    ``scopes`` are the actor's own table and set, and ``touch`` marks the actor active.
    """

    def __init__(
        self,
        mirror: Callable[[], Mirror],
        runner: RayBodyRunner,
        reservations: Reservations,
        scopes: set[str | None],
        touch: Callable[[], None],
    ) -> None:
        self._mirror = mirror
        self.runner = runner
        self.reservations = reservations
        self.batches = reservations.batches
        self.scopes_seen = scopes
        self._touch = touch

    def tool_set(self, tool_set: ResolvedToolSet | None) -> ResolvedToolSet | None:
        """The core set a wired ``tool_set`` stands for, over the current mirror."""
        return core_tool_set(self._mirror(), tool_set)

    def _live(self, token_id: str) -> ToolRunContext:
        """The context of a live execution this executor issued, by its token id."""
        ctx = self.runner.live.get(token_id)
        if ctx is None or ctx.settled:
            raise not_live(token_id)
        return ctx

    async def run_batch(
        self,
        ours: BatchExecutor,
        batch: ToolBatchInput,
        commit: Feed,
        trace: list[dict[str, object]],
        recorder: Observer | None,
    ) -> ToolBatchResult:
        """Run ``batch`` on the scope's executor: ``ours``, or a ``set_executor()`` one."""
        custom = self.custom_executor(batch)
        if isinstance(recorder, FirstCall) and custom is not None:
            recorder.now()  # no observer hears a custom executor's calls start
        if custom is None:
            return await ours.execute(batch, on_commit=commit, trace=trace, observer=recorder)
        result: ToolBatchResult = await custom.execute(batch)
        for index, committed in enumerate(result.results):
            commit(index, committed)
        return result

    def custom_executor(self, batch: ToolBatchInput) -> Any:
        """The ``set_executor()`` executor serving ``batch.scope``, or ``None`` (ours).

        Raises ``ExecutorUnavailableError`` when a global ``set_executor`` was disposed and
        nothing replaced it, exactly as the core selection does.
        """
        mirror = self._mirror()
        chosen = mirror.registry.executor_for(batch.scope)
        return chosen if mirror.is_custom_executor(chosen) else None

    async def execute_call(self, spec: CallSpec) -> ToolExecutionResult:
        """One call through the whole pipeline (bodies on workers); ``spec.key`` was reserved."""
        self._touch()
        ctrl = self.reservations.claim(spec.key, spec.aborted, spec.reason)
        self.scopes_seen.add(spec.scope)
        try:
            parent = self._live(spec.parent).token if spec.parent is not None else None
            inp = ToolExecutionInput(
                spec.call_id,
                spec.name,
                spec.arguments,
                ctrl.signal,
                root_call_id=spec.root_call_id,
                schema=spec.schema,
                scope=spec.scope,
                tool_set=self.tool_set(spec.tool_set),
                parent=parent,
            )
            return await run_pipeline(self._mirror().registry, inp, self.runner)
        finally:
            self.batches.pop(spec.key, None)
            self._touch()

    async def resolve(
        self, key: str, scope: str | None, model: ModelSelection, aborted: bool, reason: Any
    ) -> tuple[int, ...]:
        """Evaluate the scope's ``when`` conditions here; returns the admitted ids."""
        self._touch()
        ctrl = self.reservations.claim(key, aborted, reason)
        try:
            registry = self._mirror().registry
            admitted = await registry.resolve(ActivationContext(scope, model, ctrl.signal))
            mirror = self._mirror()  # the current one, as before the await or rebuilt since
            ids = (mirror.op_id_of(e.definition) for e in admitted_entries(registry, admitted))
            return tuple(sorted(i for i in ids if i is not None))
        finally:
            self.batches.pop(key, None)
            self._touch()

    async def dispatch_nested(
        self, token_id: str, name: str, arguments: Any, call_id: str | None
    ) -> ToolExecutionResult:
        """A nested call from a worker body, for the live execution ``token_id`` names."""
        self._touch()
        ctx = self._live(token_id)
        return await ctx.dispatch(name, arguments, call_id=call_id)
