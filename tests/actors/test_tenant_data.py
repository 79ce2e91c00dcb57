"""What a hostile body sends out of its process is data: nothing of it is unpickled elsewhere.

The first row of the tenant-boundaries red team, on the real runtime: a body smuggles a
*reviver* (an object whose unpickling runs code) as the error it raises, in ``ctx.dispatch``
arguments, as a deferred context's ``meta`` and inside its value, with ``isolation="call"``
(a body in a process of its own), ``"sandbox"`` (the same, confined) and ``"shared"``
(bodies in the worker actor). Each call
gets one result, the model-facing failure says what the body raised, and the reviver never
runs — in no worker, executor or driver. The control shows each smuggled object would run
its reviver wherever it was unpickled.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests.actors import _tenant_tools
from tests.actors._tenant_tools import HostileError, Reviver, forged, hostile_tools, marker_lines
from toolray import Placement, ToolBatchInput, ToolCall, UserMessage, text_block

pytestmark = pytest.mark.ray

cloudpickle.register_pickle_by_value(_tenant_tools)


@pytest.fixture(params=["call", "shared", "sandbox"])
def farm(request: Any, rt: Any, shared_rt: Any, scope_key: str) -> Any:
    """The runtime of one isolation, with the hostile tools registered in a scope of its own."""
    runtime = shared_rt if request.param == "shared" else rt
    sandbox = Placement(isolation="sandbox", size=1, spare=0)
    scope = runtime.registry.scope(scope_key)
    for tool in hostile_tools(sandbox if request.param == "sandbox" else None):
        runtime.owned.append(scope.register(tool))
    return runtime.executor(scope_key)


def _batch(*calls: ToolCall) -> ToolBatchInput:
    return ToolBatchInput(list(calls))


def _one(ex: Any, name: str, marker: Path) -> Any:
    out = ex.execute_batch_sync(_batch(ToolCall("c1", name, {"marker": str(marker)})))
    (result,) = out.results
    return result.result


def test_each_smuggled_object_runs_its_reviver_when_unpickled(tmp_path: Path) -> None:
    # the control: unpickled anywhere, each of them would run code in that process
    marker = tmp_path / "control"
    smuggled = [
        Reviver(str(marker)),
        HostileError(str(marker)),
        forged(str(marker)),
        UserMessage([text_block("ctx")], meta=Reviver(str(marker))),
    ]
    for item in smuggled:
        cloudpickle.loads(cloudpickle.dumps(item))
    assert len(marker_lines(marker)) == len(smuggled)


def test_a_raised_reviver_reaches_the_model_as_its_message_only(farm: Any, tmp_path: Path) -> None:
    marker = tmp_path / "raised"
    plain = _one(farm, "hostile_raise", marker)
    assert plain.is_error
    assert plain.error.message == "a hostile error"
    assert plain.error.info is None  # an uncoded error has no info, as in-process
    coded = _one(farm, "hostile_raise_coded", marker)
    assert coded.error.message == "a hostile coded error"
    assert (coded.error.info.name, coded.error.info.code) == ("HostileError", "HOSTILE")
    assert marker_lines(marker) == []


def test_smuggled_dispatch_arguments_are_refused(farm: Any, tmp_path: Path) -> None:
    marker = tmp_path / "dispatched"
    result = _one(farm, "hostile_dispatch", marker)
    assert not result.is_error, result
    for seen in result.value:  # each smuggled argument set failed or was refused at once
        assert seen.startswith(("failed: ", "raised: ")), seen
    assert marker_lines(marker) == []


@pytest.mark.parametrize("tool", ["hostile_defer", "hostile_defer_forged", "hostile_value"])
def test_a_smuggled_context_or_value_fails_its_own_call(
    farm: Any, tmp_path: Path, tool: str
) -> None:
    marker = tmp_path / tool
    result = _one(farm, tool, marker)
    assert result.is_error
    assert "cannot" in result.error.message or "lossless JSON" in result.error.message
    assert marker_lines(marker) == []
    after = farm.execute_batch_sync(_batch(ToolCall("c2", "hostile_victim", {"n": 1})))
    assert after.results[0].result.value == {"victim": {"n": 1}}  # its worker serves on
