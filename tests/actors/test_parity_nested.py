"""Ray-only parity checks: the nested-dispatch trust boundary, execute() parents, on_change.

- A worker names its calling execution by token id; the executor actor accepts only a
  live execution it issued: a forged id and a settled (stale) one are rejected with
  ``ValueError``.
- ``execute(parent=token)`` from a driver: the executor never trusts a token it did not
  issue (a parent would bypass the Code Mode collapse, R-COND-09).
- ``on_change``: a change committed by another driver reaches this driver's listener; a
  runtime shutting down with an active listener is quiet.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from tests import tools
from toolray import (
    AbortController,
    ExecutionToken,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
)
from toolray_actors import RayRuntime

pytestmark = pytest.mark.ray

REJECTED = "ValueError: nested dispatch rejected: parent execution {} is not live"


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope)


async def test_a_forged_parent_token_id_is_rejected(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(tools.impersonating_tool("pn_forger", "pn_inner")))
    rt.owned.append(rt.registry.register(tools.constant_tool("pn_inner", "inner-ran")))
    calls = [ToolCall("c1", "pn_forger", {"as": "forged-0000"})]
    out = await rt.executor(scope_key).execute_batch(_batch(calls, scope_key))
    assert out.results[0].result.value.startswith(REJECTED.format("forged-0000"))


async def test_a_settled_parent_token_id_is_rejected(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(tools.token_tool("pn_token")))
    rt.owned.append(rt.registry.register(tools.impersonating_tool("pn_forger2", "pn_inner2")))
    rt.owned.append(rt.registry.register(tools.constant_tool("pn_inner2", "inner-ran")))
    ex = rt.executor(scope_key)
    first = await ex.execute_batch(_batch([ToolCall("c1", "pn_token", "{}")], scope_key))
    stale = first.results[0].result.value
    assert len(stale) == 36  # a UUID: the token id the executor issued, now settled
    calls = [ToolCall("c2", "pn_forger2", {"as": stale})]
    out = await ex.execute_batch(_batch(calls, scope_key))
    assert out.results[0].result.value.startswith(REJECTED.format(stale))


async def test_execute_rejects_a_parent_the_executor_did_not_issue(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(tools.constant_tool("pn_plain", "plain-ran")))
    inp = ToolExecutionInput(
        "e1", "pn_plain", {}, AbortController().signal, scope=scope_key, parent=ExecutionToken()
    )
    with pytest.raises(ValueError, match="nested dispatch rejected: parent execution"):
        await rt.registry.execute(inp)
    ok = await rt.registry.execute(
        ToolExecutionInput("e2", "pn_plain", {}, AbortController().signal, scope=scope_key)
    )
    assert ok.value == "plain-ran"


def test_a_change_by_another_driver_reaches_the_listener_and_shutdown_is_quiet(
    rt: Any, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    other = RayRuntime.start(rt.config)  # a second driver of the namespace (same process)
    try:
        heard = threading.Event()
        rt.owned.append(rt.registry.on_change(heard.set))
        other.registry.on_change(lambda: None)  # active at shutdown
        with other.registry.register(tools.constant_tool("pn_from_other", "o")):
            assert heard.wait(30), "the other driver's change never arrived"
    finally:
        with caplog.at_level(logging.DEBUG, logger="asyncio"):
            other.shutdown()
    noisy = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert noisy == []
    assert "Traceback" not in capfd.readouterr().err
    assert rt.registry.get("pn_from_other") is None


async def test_nested_dispatch_reaches_a_recreated_executor(rt: Any, scope_key: str) -> None:
    """A worker's cached handle may name a killed executor: the next one is looked up."""
    import ray

    from toolray_actors._handles import executor_name

    rt.owned.append(rt.registry.register(tools.composite_tool("pn_outer")))
    rt.owned.append(rt.registry.register(tools.constant_tool("pn_leaf", "leaf-ran")))
    call = [ToolCall("c1", "pn_outer", {"calls": [{"name": "pn_leaf"}]})]
    ex = rt.executor(scope_key)
    first = await ex.execute_batch(_batch(call, scope_key))
    assert first.results[0].result.value[0]["value"] == "leaf-ran"
    old = ray.get_actor(executor_name(scope_key), namespace=rt.config.namespace)
    ray.kill(old)
    for _ in range(400):  # a bound: until the kill has landed (ray.kill does not wait)
        try:
            await old.ping.remote()
        except ray.exceptions.RayActorError:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("the killed executor kept answering")
    again = await ex.execute_batch(_batch(call, scope_key))
    outcome = again.results[0].result
    assert not outcome.is_error, outcome.to_wire()
    assert outcome.value[0]["value"] == "leaf-ran"
