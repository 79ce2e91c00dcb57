"""The contract suite's ``backend`` fixture: the same scenarios in-process and on Ray.

Each test gets a :class:`Backend` with one small interface (``register``, ``restrict``,
``guard``, ``install_timeouts``, ``run``); the ``ray`` parameter uses the session
``ray_runtime`` (one executor actor per scope), ``ray-sharded`` the session's
``sharded_runtime`` (scopes hosted by 2 executor shards) — both running each call in its
own process (isolation ``"call"``) — and ``ray-shared`` the session's ``shared_runtime``
(bodies in the worker actors, isolation ``"shared"``); all are marked ``ray``. Every
batch a test runs is projected (results' ``to_wire()``, values, contexts, conclusion, log
events) and compared with the projection the first backend produced for the same test and
batch number: a disagreement fails the later run with both projections, whatever the test
itself asserts afterwards.

Tool names are unique per test but identical on both backends (``<base>_<n>``, ``n``
derived from the test id without the backend), so their texts are comparable. The Ray
runtime is shared by the session: everything a test registers is disposed at teardown,
and the scope keys are a small fixed set (:data:`SCOPES`) so executor actors are reused.

What is deliberately not identical between the backends (and so not in this suite) is
listed in ``test_contract_results.py``'s docstring.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests import envs, tools
from toolray import (
    AbortController,
    AbortSignal,
    ActivationContext,
    BatchExecutor,
    Disposer,
    LogStep,
    ModelSelection,
    TimeoutPolicy,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    ToolDefinition,
    ToolExecutionInput,
    ToolExecutionResult,
    ToolRegistry,
    UserMessage,
)
from toolray.code import PythonRuntime

cloudpickle.register_pickle_by_value(tools)
cloudpickle.register_pickle_by_value(envs)

SCOPES = ("contract-a", "contract-b")
"""Scope keys shared by every test (one executor actor each on Ray)."""

WAIT_S = 20.0
"""Upper bound for any wait in this suite (a bound, never a pacing delay)."""

NO_VALUE = "<no value>"

MODEL = ModelSelection("acme", "m-1", reasoning_effort="low")
"""The model every contract step is resolved for."""

_test_numbers: dict[str, int] = {}
_projections: dict[tuple[str, int], tuple[str, Any]] = {}


def plain(value: Any) -> Any:
    """A plain-JSON-ish copy (frozen containers, tuples and messages unwrapped) for diffs."""
    if isinstance(value, UserMessage):
        return {"message": plain(dataclasses.asdict(value))}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def project(result: ToolBatchResult, events: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Everything the two backends must agree on for one batch."""
    return plain(
        {
            "results": [
                {
                    "callId": r.call_id,
                    "wire": r.result.to_wire(),
                    "fault": r.result.error.fault if r.result.is_error else None,
                    "value": getattr(r.result, "value", NO_VALUE),
                    "additional_contexts": r.result.additional_contexts,
                    "concludes_turn": r.result.concludes_turn,
                }
                for r in result.results
            ],
            "additional_contexts": result.additional_contexts,
            "concluded": result.concluded,
            "faults": dict(result.faults),
            "events": list(events),
        }
    )


class Backend:
    """One executor backend, as a test sees it."""

    kind = "?"

    def __init__(self, test_key: str) -> None:
        self._test_key = test_key
        self._number = _test_numbers.setdefault(test_key, len(_test_numbers))
        self._batches = 0
        self._owned: list[Disposer] = []

    # ------------------------------------------------------------------ setup
    def name(self, base: str) -> str:
        """A tool name unique to this test, the same on both backends."""
        return f"{base}_{self._number}"

    def _context(self, scope: str | None) -> Any:
        raise NotImplementedError

    @property
    def registry(self) -> Any:
        """The registry API under test: a ``ToolRegistry`` or ``rt.registry``."""
        raise NotImplementedError

    def context(self, scope: str | None = None) -> Any:
        """The global context, or ``scope``'s scoped context."""
        return self._context(scope)

    def own(self, disposer: Disposer) -> Disposer:
        """Lift ``disposer`` at teardown too."""
        self._owned.append(disposer)
        return disposer

    def register(
        self, definition: ToolDefinition, scope: str | None = None, *, when: Any = None
    ) -> Disposer:
        """Register globally, or on ``scope``'s layer (``when``: conditionally)."""
        return self.own(self._context(scope).register(definition, when=when))

    async def resolve(self, scope: str | None, signal: AbortSignal | None = None) -> Any:
        """The step's admitted set for ``scope`` (the backend's ``resolve``)."""
        sig = signal if signal is not None else AbortController().signal
        return await self.registry.resolve(ActivationContext(scope, MODEL, sig))

    async def execute(self, inp: ToolExecutionInput) -> ToolExecutionResult:
        """One ``execute()``; its ``to_wire()`` must match the other backend's."""
        result: ToolExecutionResult = await asyncio.wait_for(self._execute_one(inp), WAIT_S)
        fault = result.error.fault if result.is_error else None
        self.agree(
            {"wire": result.to_wire(), "value": getattr(result, "value", NO_VALUE), "fault": fault}
        )
        return result

    async def _execute_one(
        self, inp: ToolExecutionInput, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        raise NotImplementedError

    def agree(self, value: Any) -> Any:
        """Record ``value``; it must equal what the other backend recorded at this point."""
        key = (self._test_key, self._batches)
        self._batches += 1
        mine = plain(value)
        seen = _projections.get(key)
        if seen is None or seen[0] == self.kind:
            _projections[key] = (self.kind, mine)
        else:
            assert mine == seen[1], f"backends disagree at #{key[1]}: {seen}, {self.kind}: {mine}"
        return value

    def register_environment(self, definition: Any, scope: str | None = None) -> Disposer:
        """An environment, global unless ``scope`` is given (lifted at teardown)."""
        return self.own(self._context(scope).register_environment(definition))

    def environment(self, name: str, scope: str) -> Any:
        """``scope``'s handle of environment ``name`` (the same API on every backend)."""
        return self.registry.environment(name, scope=scope)

    async def close_environments(self, names: Sequence[str], scopes: Sequence[str]) -> None:
        """Close what a test opened (the session runtime outlives it)."""
        for name in names:
            for scope in scopes:
                await asyncio.wait_for(self.environment(name, scope).close(), WAIT_S)

    def restrict(
        self, scope: str, *, allow: list[str] | None = None, deny: list[str] | None = None
    ) -> Disposer:
        """A restriction on ``scope`` (also lifted at teardown)."""
        dispose: Disposer = self._context(scope).restrict(allow=allow, deny=deny)
        self._owned.append(dispose)
        return dispose

    def guard(self, fn: Any, scope: str | None = None) -> None:
        """A guard, global unless ``scope`` is given."""
        self._owned.append(self._context(scope).guard(fn))

    def on_post_execute(self, listener: Any, scope: str | None = None) -> None:
        """A post-execute listener, global unless ``scope`` is given."""
        self._owned.append(self._context(scope).on_post_execute(listener))

    def install_timeouts(self) -> None:
        """A global ``TimeoutPolicy``."""
        self._owned.append(TimeoutPolicy().install(self._context(None)))

    def close(self) -> None:
        """Lift everything this test registered (latest first)."""
        for dispose in reversed(self._owned):
            dispose()
        self._owned.clear()

    # ------------------------------------------------------------------ running
    async def _execute(self, batch: ToolBatchInput) -> ToolBatchResult:
        raise NotImplementedError

    async def run(
        self,
        calls: Sequence[ToolCall],
        scope: str,
        *,
        signal: AbortSignal | None = None,
        cap: int | None = None,
        log: LogStep | None = None,
        tool_set: Any = None,
        deadline_s: float | None = None,
        agree: bool = True,
    ) -> ToolBatchResult:
        """Run one batch from ``scope``; its projection must match the other backend's.

        ``agree=False``: not compared (batches racing each other: their order is the race's).
        """
        batch = ToolBatchInput(
            calls,
            signal if signal is not None else AbortController().signal,
            scope=scope,
            max_parallel_tool_calls=cap,
            log=log,
            tool_set=tool_set,
            deadline_s=deadline_s,
        )
        before = len(log.sink.events) if log is not None else 0  # type: ignore[attr-defined]
        result = await asyncio.wait_for(self._execute(batch), WAIT_S)
        events = log.sink.events[before:] if log is not None else []  # type: ignore[attr-defined]
        if agree:
            self._agree(project(result, events))
        return result

    def _agree(self, projection: dict[str, Any]) -> None:
        key = (self._test_key, self._batches)
        self._batches += 1
        seen = _projections.get(key)
        if seen is None or seen[0] == self.kind:
            _projections[key] = (self.kind, projection)
            return
        other, expected = seen
        assert projection == expected, _disagreement(key[1], other, expected, self.kind, projection)


def _disagreement(
    batch: int, kind_a: str, a: dict[str, Any], kind_b: str, b: dict[str, Any]
) -> str:
    lines = [f"backends disagree on batch #{batch}:"]
    pairs = list(zip(a["results"], b["results"], strict=False))
    for left, right in pairs:
        if left != right:
            lines += [f"  {kind_a}: {left}", f"  {kind_b}: {right}"]
    for field in ("additional_contexts", "concluded", "faults", "events"):
        if a[field] != b[field]:
            lines += [f"  {field} {kind_a}: {a[field]}", f"  {field} {kind_b}: {b[field]}"]
    if len(a["results"]) != len(b["results"]):
        lines.append(f"  result counts: {len(a['results'])} vs {len(b['results'])}")
    return "\n".join(lines)


class InProcessBackend(Backend):
    """A fresh ``ToolRegistry`` whose deployment executor is our ``BatchExecutor``."""

    kind = "inprocess"

    def __init__(self, test_key: str) -> None:
        super().__init__(test_key)
        # a Python code runtime, as a Ray namespace mounts one from its [code] table, so
        # run_code reads the same on both backends (no process starts until a run)
        self._registry = ToolRegistry(code_runtime=PythonRuntime(warm=0))
        self.executor = BatchExecutor(self._registry)
        self._owned.append(self._registry.set_executor(self.executor))

    @property
    def registry(self) -> Any:
        return self._registry

    def _context(self, scope: str | None) -> Any:
        return self._registry if scope is None else self._registry.scope(scope)

    async def _execute(self, batch: ToolBatchInput) -> ToolBatchResult:
        return await self._registry.execute_batch(batch)

    async def _execute_one(
        self, inp: ToolExecutionInput, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        return await self._registry.execute(inp, deadline_s=deadline_s)


class RayBackend(Backend):
    """The session's ``RayRuntime``: ``rt.registry`` and one executor actor per scope."""

    kind = "ray"

    def __init__(self, test_key: str, runtime: Any) -> None:
        super().__init__(test_key)
        self.runtime = runtime

    @property
    def registry(self) -> Any:
        return self.runtime.registry

    def _context(self, scope: str | None) -> Any:
        return self.runtime.registry if scope is None else self.runtime.scope(scope)

    async def _execute(self, batch: ToolBatchInput) -> ToolBatchResult:
        assert batch.scope is not None
        return await self.runtime.executor(batch.scope).execute_batch(batch)  # type: ignore[no-any-return]

    async def _execute_one(
        self, inp: ToolExecutionInput, deadline_s: float | None = None
    ) -> ToolExecutionResult:
        result = await self.runtime.registry.execute(inp, deadline_s=deadline_s)
        return result  # type: ignore[no-any-return]


class ShardedRayBackend(RayBackend):
    """The session cluster's sharded namespace: many scopes per executor actor."""

    kind = "ray-sharded"


class SharedRayBackend(RayBackend):
    """The session cluster's namespace whose pools run bodies in the workers themselves
    (``isolation = "shared"``); the other Ray backends run each call in its own process."""

    kind = "ray-shared"


def _test_key(nodeid: str) -> str:
    return re.sub(r"\[(?:inprocess|ray-sharded|ray-shared|ray)(?=[\]-])-?", "[", nodeid)


@pytest.fixture(
    params=[
        "inprocess",
        pytest.param("ray", marks=pytest.mark.ray),
        pytest.param("ray-sharded", marks=pytest.mark.ray),
        pytest.param("ray-shared", marks=pytest.mark.ray),
    ]
)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """The backend under test; registrations are lifted at teardown.

    ``ray`` runs one executor actor per scope; ``ray-sharded`` runs the same scenarios on a
    second namespace of the same session cluster whose scopes share 2 executor shards —
    both with the default per-call isolation (each call in its own process); ``ray-shared``
    on a third namespace whose pools run ``isolation = "shared"`` (bodies in the workers).
    """
    key = _test_key(request.node.nodeid)
    made: Backend
    if request.param == "ray":
        made = RayBackend(key, request.getfixturevalue("ray_runtime"))
    elif request.param == "ray-sharded":
        made = ShardedRayBackend(key, request.getfixturevalue("sharded_runtime"))
    elif request.param == "ray-shared":
        made = SharedRayBackend(key, request.getfixturevalue("shared_runtime"))
    else:
        made = InProcessBackend(key)
    try:
        yield made
    finally:
        made.close()


async def wait_for_files(directory: Path, names: Sequence[str]) -> None:
    """Wait (bounded) until every ``<directory>/<name>`` exists: a body has reached a point."""
    deadline = time.monotonic() + WAIT_S
    while not all((directory / n).exists() for n in names):
        if time.monotonic() > deadline:
            missing = [n for n in names if not (directory / n).exists()]
            raise AssertionError(f"never reached: {missing}")
        await asyncio.sleep(0.005)


# ---------------------------------------------------------------------- expectations
def text(value: str) -> list[dict[str, str]]:
    """One text block."""
    return [{"type": "text", "text": value}]


def success(content: str) -> dict[str, Any]:
    """The ``to_wire()`` of a success whose content is one text block."""
    return {"isError": False, "content": text(content)}


def failure(message: str, name: str | None = None, code: str | None = None) -> dict[str, Any]:
    """The ``to_wire()`` of a registry failure (``Error: <message>``; info if coded)."""
    error: dict[str, Any] = {"message": message}
    if name is not None:
        error["info"] = {"name": name, "code": code}
    return {"isError": True, "content": text("Error: " + message), "error": error}


def wires(result: ToolBatchResult) -> list[tuple[str, Any]]:
    """``(call_id, to_wire())`` per result, plain."""
    return [(r.call_id, plain(r.result.to_wire())) for r in result.results]


def values(result: ToolBatchResult) -> list[Any]:
    """Each result's value (``NO_VALUE`` for failures), plain."""
    return [plain(getattr(r.result, "value", NO_VALUE)) for r in result.results]
