"""``ToolRegistry``: the facade that composes the registry's parts.

One :class:`~toolray.registry._state.RegistryState` holds layers, the scope tree, the view cache and
the epoch. The registry reads it as a :class:`~toolray.registry._read.ReadSide` (which is the
``ToolLookup`` the pipeline runs against), writes its global layer as a
:class:`~toolray.registry._write.WriteSide`, hands out scope handles through
:class:`~toolray.registry._write.Scopes`, and adds what needs everything below: conditional
admission (``resolve``), one call through the pipeline (``execute``) and batches through the
selected executor (``execute_batch``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import warnings
from collections.abc import Coroutine, Iterable
from typing import Any, TypeVar, final

from toolray._activation import ActivationContext
from toolray._approval import ApprovalService
from toolray._clock import Clock, system_clock
from toolray._disposer import Disposer
from toolray._execution import ToolExecutionInput
from toolray._outcomes import ToolExecutionResult
from toolray.batch._executor import BatchExecutor
from toolray.batch._types import ToolBatchInput, ToolBatchResult, ToolExecutor, check_cap
from toolray.codemode._program import ProgramRuntime, code_run
from toolray.codemode._prompt import ToolPromptSection, missing_runtime, prompt_sections
from toolray.codemode._run_code import RunCodeDefinition
from toolray.environments._backend import LocalBackend
from toolray.environments._handle import EnvironmentHandle, LocalService
from toolray.environments._instances import Instances
from toolray.environments._local import Parker, dispose_scope
from toolray.errors import CodeRunFailedError, ExecutorUnavailableError
from toolray.farm._bounds import DEFAULT_MAX_RESULT_BYTES, check_bound
from toolray.farm._controls import FarmControls
from toolray.farm._limiter import LocalRateLimiter, RateLimiter
from toolray.pipeline._deadline import DEFAULT_KILL_GRACE_MS, check_deadline, with_deadline
from toolray.pipeline._dispatch import inline_runner
from toolray.pipeline._stages import run_pipeline

from ._admission import ResolvedToolSet, resolve_tool_set
from ._layers import Entry
from ._read import ReadSide
from ._state import MODES, RegistryState, RegistryStatistics
from ._write import ScopedTools, Scopes, WriteSide

__all__ = (
    "ToolRegistry",
    "admitted_entries",
    "chain_entries",
    "has_scope",
    "scope_parent",
    "tool_set_of",
)


@final
class ToolRegistry(ReadSide, WriteSide):
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

    def __init__(
        self,
        *,
        mode: str = "native",
        clock: Clock | None = None,
        code_runtime: ProgramRuntime | None = None,
        max_parallel_sub_calls: int = 10,
        max_result_bytes: int | None = DEFAULT_MAX_RESULT_BYTES,
        max_content_chars: int | None = None,
        rate_limiter: RateLimiter | None = None,
        environments: Instances | None = None,
    ) -> None:
        """A registry; see the class docstring.

        ``max_result_bytes`` (default 1 MiB; ``None``: unbounded) and ``max_content_chars``
        (default ``None``) bound every call's result unless its definition sets its own.
        ``rate_limiter`` is for runtimes that share buckets beyond this registry (the Ray
        layer); by default each rate-limited tool has one bucket in this registry.
        ``environments`` are a runtime's own instances (kept where it keeps them: it parks
        them and closes a disposed scope's itself); by default, in this process.
        """
        if mode not in MODES:
            raise ValueError(f'mode must be one of "native", "code", "both" (got {mode!r})')
        self._max_parallel_sub_calls = check_cap(max_parallel_sub_calls, "max_parallel_sub_calls")
        if code_runtime is not None and not (
            isinstance(getattr(code_runtime, "language", None), str)
            and callable(getattr(code_runtime, "run", None))
        ):
            raise TypeError(
                "code_runtime must be a CodeRuntime (a str language and an async "
                "run(program, bindings, signal)), e.g. toolray.code.PythonRuntime()"
            )
        self._code_runtime = code_runtime
        body = code_run(self, self._runtime, self._max_parallel_sub_calls, _no_runtime)
        run_code = RunCodeDefinition(execute=body, language=self._language)
        check_bound("ToolRegistry", "max_result_bytes", max_result_bytes)
        check_bound("ToolRegistry", "max_content_chars", max_content_chars)
        clock = clock if clock is not None else system_clock
        farm = FarmControls(
            rate_limiter=rate_limiter if rate_limiter is not None else LocalRateLimiter(clock),
            max_result_bytes=max_result_bytes,
            max_content_chars=max_content_chars,
        )
        state = RegistryState(
            mode=mode,
            clock=clock,
            run_code=Entry(definition=run_code, when=None, layer_key=None),
            farm=farm,
        )
        ReadSide.__init__(self, state)
        WriteSide.__init__(self, state, None)
        local = environments is None
        instances = environments or Instances(LocalBackend(), self._environment_of, clock)
        state.environments = instances
        self._service = LocalService(instances)
        self._scopes = Scopes(state, self._scope_disposed if local else None)
        if local and clock is system_clock:
            parker = Parker(instances)
            instances.listeners.append(lambda event: parker.poke())
        self._default_executor: ToolExecutor | None = None

    @property
    def code_runtime(self) -> Any:
        """The code runtime ``run_code`` runs programs with (``None``: not mounted)."""
        return self._code_runtime

    @property
    def max_parallel_sub_calls(self) -> int:
        """How many parallel sub-calls of one ``run_code`` program may overlap."""
        return self._max_parallel_sub_calls

    def _runtime(self) -> ProgramRuntime | None:
        return self._code_runtime

    def _language(self) -> str | None:
        runtime = self._code_runtime
        return None if runtime is None else runtime.language

    def prompt_sections(self, scope: str | None = None) -> list[ToolPromptSection]:
        """The Code Mode system-prompt sections for ``scope`` (R-SCH-15).

        ``tools:code-only`` (order 99) holds the "only ``run_code`` is callable" rule under
        an effective ``code`` mode; ``tools:sdk`` (order 150) the typed stubs of the tools a
        program can call, under ``code`` or ``both``. Both are listed (possibly empty)
        wherever Code Mode is contributed — a non-native deployment, or a non-native
        ``present_as`` on the scope's chain — and neither elsewhere. A non-native mode with
        no runtime, or a runtime language without a renderer, raises ``RuntimeError``.
        """
        return prompt_sections(self, scope)

    def stats(self) -> RegistryStatistics:
        """A frozen snapshot: scopes, live layers (empty ones are reclaimed), tools, the cache."""
        return self._state.stats()

    def statistics(self) -> RegistryStatistics:
        """Deprecated name of :meth:`stats`."""
        message = "ToolRegistry.statistics() is deprecated: use stats()"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        return self.stats()

    def scope(self, key: str, *, parent: str | None = None) -> ScopedTools:
        """The handle of scope ``key`` (created on first use, with ``parent``'s chain)."""
        return self._scopes.scope(key, parent)

    def _environment_of(self, scope: str | None, name: str) -> Any:
        return self.environment_definition(name, scope)

    def _scope_disposed(self, key: str) -> None:
        dispose_scope(self.environments, key, run_blocking)

    def environment(self, name: str, *, scope: str | None = None) -> EnvironmentHandle:
        """The handle of ``scope``'s instance of environment ``name`` (in this process).

        The environment must be registered where ``scope`` sees it by the time the handle
        is used (``UnknownEnvironmentError`` otherwise).
        """
        return EnvironmentHandle(self._service, name, scope, run_blocking)

    async def close_environments(self) -> int:
        """Close every environment instance of this registry (its ``close`` runs); how many."""
        return await self.environments.close_all()

    def set_approval(self, service: ApprovalService) -> Disposer:
        """Mount the approval service that answers ``Ask`` decisions (global only)."""
        if not callable(getattr(service, "request", None)):
            raise TypeError("set_approval() takes an object with an async request(request)")
        approvals = self._state.approvals
        approvals.append(service)

        def dispose() -> None:
            if service in approvals:
                approvals.remove(service)

        return Disposer(dispose)

    async def resolve(self, context: ActivationContext) -> ResolvedToolSet:
        """Evaluate every ``when`` visible to the context's scope once, concurrently."""
        if not isinstance(context, ActivationContext):
            kind = type(context).__name__
            raise TypeError(f"resolve() takes an ActivationContext, not {kind}")
        return await resolve_tool_set(self._state, context)

    async def execute(
        self, inp: ToolExecutionInput, *, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        """Run one call through the whole pipeline; always returns one frozen result.

        ``deadline_s`` bounds the call as a batch's deadline bounds its calls: past it the
        call ends ``DEADLINE_EXCEEDED`` (see ``ToolBatchInput``).
        """
        if not isinstance(inp, ToolExecutionInput):
            raise TypeError(f"execute() takes a ToolExecutionInput, not {type(inp).__name__}")
        if check_deadline(deadline_s) is None:
            return await run_pipeline(self, inp)
        deadline = with_deadline(
            inp.signal, deadline_s, grace_ms=DEFAULT_KILL_GRACE_MS, clock=self.clock
        )
        try:
            bounded = dataclasses.replace(inp, signal=deadline.signal)
            return await run_pipeline(self, bounded, inline_runner(deadline=deadline.timer))
        finally:
            deadline.release()

    def executor_for(self, scope: str | None) -> ToolExecutor:
        """The nearest scope's executor up the chain, else the deployment default."""
        state = self._state
        for key in reversed(state.chain(scope)):
            layer = state.layer(key)
            if layer is not None and layer.executors:
                return layer.executors[-1]  # type: ignore[no-any-return]
        glob = state.global_layer
        if glob.executors:
            return glob.executors[-1]  # type: ignore[no-any-return]
        if not state.default_replaced:
            if self._default_executor is None:
                self._default_executor = BatchExecutor(self)
            return self._default_executor
        raise ExecutorUnavailableError("no tool executor is available for this scope")

    async def execute_batch(self, batch: ToolBatchInput) -> ToolBatchResult:
        """Delegate a raw model batch to the selected executor."""
        if not isinstance(batch, ToolBatchInput):
            raise TypeError(f"execute_batch() takes a ToolBatchInput, not {type(batch).__name__}")
        return await self.executor_for(batch.scope).execute(batch)

    def execute_batch_sync(self, batch: ToolBatchInput) -> ToolBatchResult:
        """``execute_batch`` from blocking code: a script, or inside a running loop (Jupyter).

        Example:
            >>> from toolray import ToolBatchInput, ToolCall, ToolRegistry
            >>> batch = ToolBatchInput([ToolCall("c1", "x", "{}")])
            >>> ToolRegistry().execute_batch_sync(batch).results[0].result.error.info.code
            'UNKNOWN_TOOL'
        """
        return run_blocking(self.execute_batch(batch))

    def execute_sync(
        self, inp: ToolExecutionInput, *, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        """``execute`` from blocking code: a script, or inside a running loop (Jupyter)."""
        return run_blocking(self.execute(inp, deadline_s=deadline_s))


_T = TypeVar("_T")


def run_blocking(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion and return its value, from any thread.

    With no loop running in this thread it is ``asyncio.run``; inside a running loop (a
    notebook cell, an async framework's sync callback) the coroutine runs on a fresh loop in
    a helper thread while this thread waits, so the caller's loop is never re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: list[Any] = []

    def main() -> None:
        try:
            box.append((True, asyncio.run(coro)))
        except BaseException as err:
            box.append((False, err))

    thread = threading.Thread(target=main, name="toolray-sync", daemon=True)
    thread.start()
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _no_runtime(mode: str) -> Exception:
    return CodeRunFailedError(missing_runtime(mode))


def has_scope(registry: ToolRegistry, key: str) -> bool:
    """Whether ``key`` is a live scope of ``registry`` (created and not disposed)."""
    return registry._state.has_scope(key)


def scope_parent(registry: ToolRegistry, key: str) -> str | None:
    """The parent ``key`` is bound to, or ``None`` (no parent, or no such scope)."""
    return registry._state.parent_of(key)


def chain_entries(registry: ToolRegistry, scope: str | None) -> list[Entry]:
    """Every registration on ``scope``'s chain (global layer first), visible or not."""
    return [e for layer in registry._state.layers_on_chain(scope) for e in layer.tools.values()]


def admitted_entries(registry: ToolRegistry, tool_set: ResolvedToolSet) -> list[Entry]:
    """The registrations ``tool_set`` admitted that are still registered, in chain order."""
    return [e for e in chain_entries(registry, tool_set.scope) if tool_set.admits(e)]


def tool_set_of(
    registry: ToolRegistry, scope: str | None, admitted: Iterable[Entry]
) -> ResolvedToolSet:
    """A step's set for ``scope`` admitting exactly ``admitted`` (a set rebuilt elsewhere).

    A runtime that resolves in one process and runs the step in another records which
    registrations were admitted and rebuilds the set over its own registry with this.
    """
    return ResolvedToolSet(registry._state, scope, {e.serial for e in admitted if e.alive})
