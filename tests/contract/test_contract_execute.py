"""Contract: ``execute()`` (one call) with the core's fidelity on both backends.

Non-JSON arguments (NaN, a tuple, a set, a mapping that is not a dict) are that call's
P-ARGS-4 failure, never an exception in the driver; ``root_call_id``, ``schema`` and
``tool_set`` travel; an abort before the call gives ``ABORTED_BEFORE_DISPATCH``, a later one
is forwarded (``ABORTED``). On Ray: ``rt.registry.execute`` → the scope's executor actor.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import MappingProxyType
from typing import Any

from tests import tools
from tests.contract.conftest import SCOPES, Backend, failure, plain, success, wait_for_files
from toolray import AbortController, AbortSignal, ToolExecutionInput

A, B = SCOPES

ARGS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"


def _input(name: str, arguments: Any, signal: AbortSignal | None = None, **kw: Any) -> Any:
    sig = signal if signal is not None else AbortController().signal
    return ToolExecutionInput("e1", name, arguments, sig, scope=kw.pop("scope", A), **kw)


async def test_non_json_arguments_are_the_calls_failure_p_args_4(backend: Backend) -> None:
    echo = backend.name("echo")
    backend.register(tools.raw_echo_tool(echo))
    bad = {"isError": True, "content": [{"type": "text", "text": f"Error: {ARGS_NOT_JSON}"}]}
    bad["error"] = {"message": ARGS_NOT_JSON}
    for arguments in (
        {"x": float("nan")},
        {"t": (1, 2)},
        {"s": {1}},
        MappingProxyType({"a": 1}),
        {"f": float("inf")},
    ):
        result = await backend.execute(_input(echo, arguments))
        assert result.to_wire() == bad, arguments
    fine = await backend.execute(_input(echo, {"ok": [1, 2.5, None]}))
    assert plain(fine.value) == {"received": {"ok": [1, 2.5, None]}}


async def test_root_call_id_schema_and_tool_set_travel(backend: Backend) -> None:
    who, cond, shown = backend.name("who"), backend.name("cond"), backend.name("shown")
    backend.register(tools.whoami_tool(who))
    backend.register(tools.constant_tool(cond, "cond-ran"), when=tools.when_model("m-1"))
    backend.register(tools.constant_tool(shown, "x"))
    backend.own(backend.context(A).on_pre_execute(tools.deny_with_schema(shown)))
    ident = await backend.execute(_input(who, {}, root_call_id="root-7"))
    assert plain(ident.value) == {
        "call_id": "e1",
        "root_call_id": "root-7",
        "scope": A,
        "nested": False,
        "parent_is_caller": False,
    }
    schema = {"type": "object", "title": "bound"}
    denied = await backend.execute(_input(shown, {}, schema=schema))
    assert denied.to_wire() == failure('schema={"title": "bound", "type": "object"}')
    unknown = failure(f'unknown tool "{cond}"', "ToolNotFoundError", "UNKNOWN_TOOL")
    assert (await backend.execute(_input(cond, {}))).to_wire() == unknown
    step = await backend.resolve(A)
    admitted = await backend.execute(_input(cond, {}, tool_set=step))
    assert admitted.to_wire() == success("cond-ran")


async def test_aborts_before_and_during_execute(backend: Backend, tmp_path: Path) -> None:
    wait = backend.name("wait")
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    early = AbortController()
    early.abort("stop")
    before = await backend.execute(_input(wait, {"key": "k0"}, early.signal, scope=B))
    assert before.to_wire() == failure(
        "tool call aborted before dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH"
    )
    late = AbortController()

    async def abort_when_started() -> None:
        await wait_for_files(tmp_path, ["k1.started"])
        late.abort("stop")

    during, _ = await asyncio.gather(
        backend.execute(_input(wait, {"key": "k1"}, late.signal, scope=B)), abort_when_started()
    )
    assert during.to_wire() == failure("tool call aborted", "AbortError", "ABORTED")
