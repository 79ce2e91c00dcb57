"""Contract: conditional admission with ``resolve`` and the step's set in batches.

``await registry.resolve(ActivationContext(...))`` on both backends (on Ray the ``when``
conditions run in the scope's executor actor) and ``ToolBatchInput(tool_set=...)``: a
conditional tool is ``UNKNOWN_TOOL`` without a set, runs with one that admitted it; the set
is a snapshot (registered later: not admitted; disposed, or disposed set: dropped out) and
admits nothing for another scope. A raising condition and an abort before or during
resolution raise and publish nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests import tools
from tests.contract.conftest import SCOPES, Backend, failure, success, wait_for_files, wires
from toolray import AbortController, AbortError, ResolvedToolSet, ToolCall

A, B = SCOPES


def _unknown(name: str) -> dict[str, object]:
    return failure(f'unknown tool "{name}"', "ToolNotFoundError", "UNKNOWN_TOOL")


async def test_a_conditional_tool_runs_only_through_an_admitting_set(backend: Backend) -> None:
    plain_, cond, off = backend.name("plain"), backend.name("cond"), backend.name("off")
    backend.register(tools.constant_tool(plain_, "plain-ran"))
    backend.register(tools.constant_tool(cond, "cond-ran"), when=tools.when_model("m-1"))
    backend.register(tools.constant_tool(off, "off-ran"), when=tools.when_model("other"), scope=A)
    calls = [ToolCall("c1", cond, "{}"), ToolCall("c2", off, "{}"), ToolCall("c3", plain_, "{}")]
    without = await backend.run(calls, A)
    assert wires(without) == [
        ("c1", _unknown(cond)),
        ("c2", _unknown(off)),
        ("c3", success("plain-ran")),
    ]
    step = await backend.resolve(A)
    assert isinstance(step, ResolvedToolSet)
    assert step.scope == A
    with_set = await backend.run(calls, A, tool_set=step)
    assert wires(with_set) == [
        ("c1", success("cond-ran")),
        ("c2", _unknown(off)),
        ("c3", success("plain-ran")),
    ]
    other_scope = await backend.run(calls, B, tool_set=step)  # a set is for its own scope
    assert [w["isError"] for _, w in wires(other_scope)] == [True, True, True]
    with step:  # a context manager, like the core's: leaving it disposes the set
        assert not step.disposed
    assert step.disposed
    closed = await backend.run(calls, A, tool_set=step)
    assert wires(closed)[0] == ("c1", _unknown(cond))


async def test_the_set_is_a_snapshot_of_admission(backend: Backend) -> None:
    early, late, cond = backend.name("early"), backend.name("late"), backend.name("cond")
    backend.register(tools.constant_tool(early, "early-ran"))
    lift = backend.register(tools.constant_tool(cond, "cond-ran"), when=tools.when_model("m-1"))
    step = await backend.resolve(B)
    backend.register(tools.constant_tool(late, "late-ran"))
    calls = [ToolCall("c1", early, "{}"), ToolCall("c2", late, "{}"), ToolCall("c3", cond, "{}")]
    first = await backend.run(calls, B, tool_set=step)
    assert wires(first) == [
        ("c1", success("early-ran")),
        ("c2", _unknown(late)),  # registered after resolve: not admitted
        ("c3", success("cond-ran")),
    ]
    lift()
    backend.register(tools.constant_tool(cond, "cond-again"), when=tools.when_model("m-1"))
    second = await backend.run(calls, B, tool_set=step)
    assert wires(second)[2] == ("c3", _unknown(cond))  # disposed, then registered anew


async def test_a_raising_condition_fails_resolve(backend: Backend) -> None:
    backend.register(tools.constant_tool(backend.name("ok"), "ok"), when=tools.when_model("m-1"))
    backend.register(tools.constant_tool(backend.name("bad"), "b"), when=tools.when_raises("boom"))
    with pytest.raises(LookupError) as info:
        await backend.resolve(A)
    assert backend.agree([type(info.value).__name__, str(info.value)]) == ["LookupError", "boom"]


async def test_resolve_with_an_aborted_signal_raises(backend: Backend) -> None:
    backend.register(tools.constant_tool(backend.name("cond"), "c"), when=tools.when_model("m-1"))
    ctrl = AbortController()
    ctrl.abort("stop")
    with pytest.raises(AbortError) as info:
        await backend.resolve(A, ctrl.signal)
    reason = KeyError("mine")
    again = AbortController()
    again.abort(reason)
    with pytest.raises(KeyError) as own:
        await backend.resolve(A, again.signal)
    assert own.value is reason
    assert backend.agree(str(info.value)) == "tool resolution was aborted"


async def test_an_abort_during_resolution_publishes_nothing(
    backend: Backend, tmp_path: Path
) -> None:
    cond = backend.name("cond")
    backend.register(tools.constant_tool(cond, "c"), when=tools.when_waits(str(tmp_path), "w"))
    ctrl = AbortController()

    async def abort_when_waiting() -> None:
        await wait_for_files(tmp_path, ["w.started"])
        ctrl.abort("stop")

    outcome = await asyncio.gather(
        backend.resolve(B, ctrl.signal), abort_when_waiting(), return_exceptions=True
    )
    assert isinstance(outcome[0], AbortError)
    assert backend.agree(str(outcome[0])) == "tool resolution was aborted"
