"""Contract: nested dispatch (``ctx.dispatch`` / ``ctx.dispatch_sync``).

A composite body calls other tools through the full pipeline of its own scope: guards,
pre/post-execute hooks and results exactly as for a model call, with ``parent`` = the
caller's token, its ``root_call_id``, scope and signal, ids ``<caller>:sub:<n>``, no
``meta`` (P-BODY-12), and non-JSON arguments as that nested call's P-ARGS-4 failure. On
Ray the body runs on a worker, and the nested call goes back to the executor actor, which
maps the caller's token id to the live execution (forged and stale ids: see
``tests/actors/test_parity_nested.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests import tools
from tests.contract.conftest import SCOPES, Backend, failure, plain, success, wait_for_files
from toolray import AbortController, ToolCall

A, B = SCOPES

ARGS_NOT_JSON = "tool execution arguments must be losslessly JSON-serializable"


def _composite_call(call_id: str, name: str, calls: list[dict[str, Any]]) -> ToolCall:
    return ToolCall(call_id, name, {"calls": calls})


def _nested(result: Any) -> list[dict[str, Any]]:
    """The nested views a composite returned (plain)."""
    return plain(result.results[0].result.value)  # type: ignore[no-any-return]


async def test_nested_calls_get_the_callers_identity_and_default_ids(backend: Backend) -> None:
    """Ids ``c1:sub:1``, ``c1:sub:2`` count per calling execution; parent = caller token."""
    outer, who = backend.name("outer"), backend.name("who")
    backend.register(tools.composite_tool(outer))
    backend.register(tools.whoami_tool(who))
    calls = [{"name": who, "tag": True}, {"name": who, "tag": True}, {"name": who, "call_id": "x"}]
    result = await backend.run([_composite_call("c1", outer, calls)], A)
    views = _nested(result)
    assert [v["value"]["call_id"] for v in views] == ["c1:sub:1", "c1:sub:2", "x"]
    assert {v["value"]["root_call_id"] for v in views} == {"c1"}
    assert {v["value"]["scope"] for v in views} == {A}
    assert [v["value"]["parent_is_caller"] for v in views] == [True, True, False]
    assert all(v["value"]["nested"] for v in views)
    assert all(v["meta"] is None and not v["wire"]["isError"] for v in views)


async def test_a_sync_body_dispatches_with_dispatch_sync(backend: Backend) -> None:
    outer, who = backend.name("outer"), backend.name("who")
    backend.register(tools.composite_tool(outer, sync=True))
    backend.register(tools.whoami_tool(who))
    calls = [{"name": who, "tag": True}, {"name": backend.name("nope")}]
    views = _nested(await backend.run([_composite_call("c7", outer, calls)], B))
    assert views[0]["value"]["call_id"] == "c7:sub:1"
    assert views[0]["value"]["parent_is_caller"] is True
    unknown = backend.name("nope")
    assert views[1]["wire"] == failure(
        f'unknown tool "{unknown}"', "ToolNotFoundError", "UNKNOWN_TOOL"
    )


async def test_nested_calls_pass_through_the_scopes_guards_and_hooks(backend: Backend) -> None:
    """A scope guard denies a nested call; pre-execute sees ``parent``; post-execute adds."""
    outer, secret, inner = backend.name("outer"), backend.name("secret"), backend.name("inner")
    backend.register(tools.composite_tool(outer))
    backend.register(tools.constant_tool(secret, "secret-ran"))
    backend.register(tools.constant_tool(inner, "inner-ran"))
    backend.guard(tools.deny_guard(secret, "not from this agent"), scope=A)
    backend.own(backend.context(A).on_pre_execute(tools.deny_nested(inner, "nested inner denied")))
    backend.on_post_execute(tools.post_note(secret, "post saw it"), scope=B)
    calls = [{"name": secret}, {"name": inner}]
    in_a = _nested(await backend.run([_composite_call("c1", outer, calls)], A))
    assert [v["wire"] for v in in_a] == [
        failure("not from this agent"),
        failure("nested inner denied"),
    ]
    direct = await backend.run([ToolCall("c2", inner, "{}")], A)  # model-direct: allowed
    assert direct.results[0].result.to_wire() == success("inner-ran")
    in_b = _nested(await backend.run([_composite_call("c3", outer, calls)], B))
    assert [v["wire"] for v in in_b] == [success("secret-ran"), success("inner-ran")]
    assert [v["contexts"] for v in in_b] == [["post saw it"], []]


async def test_a_nested_call_inherits_the_callers_abort(backend: Backend, tmp_path: Path) -> None:
    """Aborting the batch aborts the nested call (ABORTED), then the composite (ABORTED)."""
    outer, wait = backend.name("outer"), backend.name("wait")
    backend.register(tools.composite_tool(outer))
    backend.register(tools.waiting_tool(wait, str(tmp_path)))
    ctrl = AbortController()
    call = _composite_call("c1", outer, [{"name": wait, "arguments": {"key": "k1"}}])

    async def abort_when_started() -> None:
        await wait_for_files(tmp_path, ["k1.started"])
        ctrl.abort("user cancelled")

    result, _ = await asyncio.gather(
        backend.run([call], A, signal=ctrl.signal), abort_when_started()
    )
    outcome = result.results[0].result
    assert outcome.to_wire() == failure("tool call aborted", "AbortError", "ABORTED")
    (context,) = outcome.additional_contexts
    assert plain(context.meta)[0]["wire"] == failure("tool call aborted", "AbortError", "ABORTED")


async def test_non_json_nested_arguments_are_that_calls_failure_p_args_4(backend: Backend) -> None:
    outer, inner = backend.name("outer"), backend.name("inner")
    backend.register(tools.non_json_nested_tool(outer, inner))
    backend.register(tools.raw_echo_tool(inner))
    result = await backend.run([ToolCall("c1", outer, "{}")], A)
    bad = {"isError": True, "content": [{"type": "text", "text": f"Error: {ARGS_NOT_JSON}"}]}
    bad["error"] = {"message": ARGS_NOT_JSON}
    assert plain(result.results[0].result.value) == [bad, bad, bad]


async def test_a_collapsed_code_scope_accepts_nested_calls_r_cond_09(backend: Backend) -> None:
    """Under ``code`` a model-direct call is refused; a nested one (parent set) runs."""
    inner = backend.name("inner")
    backend.register(tools.constant_tool(inner, "inner-ran"))
    backend.own(backend.context(B).present_as("code"))
    backend.own(backend.context(B).on_execute(tools.run_code_dispatches(inner)))
    direct = await backend.run([ToolCall("c1", inner, "{}")], B)
    message = (
        f'unknown tool "{inner}": only `run_code` is callable directly — call `{inner}` from '
        "inside a `run_code` program instead"
    )
    assert direct.results[0].result.to_wire() == failure(
        message, "ToolNotFoundError", "UNKNOWN_TOOL"
    )
    via = await backend.run([ToolCall("c2", "run_code", '{"code": "x", "description": "y"}')], B)
    assert plain(via.results[0].result.value) == {"logs": [], "result": success("inner-ran")}
