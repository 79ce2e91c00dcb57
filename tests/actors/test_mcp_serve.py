"""MCP over streamable HTTP on the Ray backend: a real server on 127.0.0.1, real SDK clients.

The app serves a namespace of its own on the session's Ray: from this driver (uvicorn in a
thread), and as a Ray Serve application with two replicas whose session table is shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.adapters._http import (
    CLIENT_TIMEOUT,
    MCP_HEADERS,
    Served,
    bearer,
    free_port,
    initialize_body,
    open_session,
    serve_app,
    texts,
    until,
)
from toolray.adapters.mcp import BearerTokens, mcp_http_app

from . import _mcp_tools as farm

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def mcp_rt(ray_runtime: Any) -> Iterator[Any]:
    """A namespace of its own on the session's Ray, with the farm registered."""
    from toolray_actors import RayRuntime, RuntimeConfig

    base = ray_runtime.config.model_dump()
    runtime = RayRuntime.start(RuntimeConfig.model_validate({**base, "namespace": "toolray-mcp"}))
    farm.register(runtime.registry)
    yield runtime
    runtime.teardown()


@pytest.fixture(scope="module")
def served(mcp_rt: Any) -> Iterator[Served]:
    app = mcp_http_app(mcp_rt.registry, auth=BearerTokens(farm.TOKENS), scope_per_session=True)
    with serve_app(app) as server:
        yield server


async def test_list_and_call_on_ray(served: Served) -> None:
    async with open_session(served.url, "tok-a") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        added = await session.call_tool("add", {"a": 20, "b": 22})
        own = await session.call_tool("a_only", {})
    async with open_session(served.url, "tok-b") as other:
        theirs = await other.call_tool("a_only", {})
    assert {"add", "whoami", "a_only"} <= names
    assert texts(added) == ["42"]
    assert texts(own) == ["a_only ran"]
    assert texts(theirs) == ['Error: unknown tool "a_only"']


async def test_a_crashing_body_fails_its_call_alone(served: Served) -> None:
    async with open_session(served.url, "tok-b") as session:
        crashed, peer = await asyncio.gather(
            session.call_tool("crash", {}), session.call_tool("add", {"a": 1, "b": 2})
        )
        after = await session.call_tool("add", {"a": 2, "b": 2})
    assert crashed.is_error
    assert texts(peer) == ["3"]
    assert texts(after) == ["4"]


async def test_a_hung_body_ends_at_its_deadline(served: Served) -> None:
    async with open_session(served.url, "tok-b") as session:
        hung = await session.call_tool("hang", {})
        after = await session.call_tool("add", {"a": 1, "b": 1})
    assert hung.is_error
    assert "timed out after 500ms" in texts(hung)[0]
    assert texts(after) == ["2"]


async def test_a_client_cancel_aborts_the_call_on_its_worker(
    served: Served, tmp_path: Path
) -> None:
    async with open_session(served.url, "tok-a") as session:
        waiting = asyncio.ensure_future(session.call_tool("nap", {"folder": str(tmp_path)}))
        await until(lambda: (tmp_path / "started").exists(), 60)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await until(lambda: (tmp_path / "aborted").exists(), 30)
    assert (tmp_path / "aborted").read_text() == "the MCP client cancelled the call"


async def test_tools_imported_over_http_keep_one_session_per_process(mcp_rt: Any) -> None:
    """MCP in on Ray: the call processes running the bodies each keep their session (a
    call process with a connection thread is still clean, so it is reused with it)."""
    from tests.adapters import _http_tools as remote
    from toolray import ToolBatchInput, ToolCall
    from toolray.adapters.mcp import close_http_sessions, http_connector, import_mcp_tools

    app = mcp_http_app(remote.build(), auth=BearerTokens(remote.TOKENS), stateless=False)
    with serve_app(app) as server:
        connector = http_connector(server.url, headers=bearer("tok-a"))
        for definition in await import_mcp_tools(connector, prefix="remote"):
            mcp_rt.registry.register(definition)
        await close_http_sessions()  # the driver's own (it listed the tools)
        results = []
        for n in range(3):
            calls = [ToolCall(f"r{n}-{i}", "remote_add", {"a": i, "b": n}) for i in range(6)]
            batch = await mcp_rt.registry.execute_batch(ToolBatchInput(calls))
            results.append([r.result.value for r in batch.results])
        stats = app.stats()
    assert results == [[[{"type": "text", "text": str(i + n)}] for i in range(6)] for n in range(3)]
    assert stats.sessions_opened <= 1 + 4  # the listing's, and one per call process at most
    assert stats.sessions_open == stats.sessions_opened - 1  # none dropped or reopened


async def test_sessions_have_their_own_environments_closed_at_the_end(
    served: Served, mcp_rt: Any
) -> None:
    async with open_session(served.url, "tok-a") as one, open_session(served.url, "tok-a") as two:
        first = texts(await one.call_tool("whoami", {}))[0]
        assert [texts(await one.call_tool("bump", {})) for _ in range(2)] == [["1"], ["2"]]
        assert texts(await two.call_tool("bump", {})) == ["1"]
        assert mcp_rt.registry.environment("counter", scope=first).status_sync().state == "open"
    assert first.startswith("a/mcp-")
    handle = mcp_rt.registry.environment("counter", scope=first)
    await until(lambda: handle.status_sync().state == "closed", 30)
    # every session ends (an earlier test's client may still be saying goodbye)
    await until(lambda: served.app.stats().sessions_open == 0, 30)


async def test_replicas_sharing_a_table_serve_one_session(mcp_rt: Any, tmp_path: Path) -> None:
    from toolray_actors._handles import control_options, create_mcp_sessions, kill
    from toolray_actors.serve._store import RaySessions

    table = create_mcp_sessions("test-shared", "toolray-mcp", control_options(None))
    apps = [
        mcp_http_app(
            mcp_rt.registry,
            auth=BearerTokens(farm.TOKENS),
            scope_per_session=True,
            sessions=RaySessions(table),
        )
        for _ in range(2)
    ]
    headers = {**MCP_HEADERS, **bearer("tok-a"), "mcp-protocol-version": "2025-11-25"}
    nap = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "nap", "arguments": {"folder": str(tmp_path)}},
    }
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}
    try:
        with serve_app(apps[0]) as one, serve_app(apps[1]) as two:
            async with httpx2.AsyncClient(headers=headers, timeout=CLIENT_TIMEOUT) as http:
                opened = await http.post(one.url, json=initialize_body())
                session = {"mcp-session-id": opened.headers["mcp-session-id"]}
                listed = await http.post(
                    two.url, json={**initialize_body(1), "method": "tools/list"}, headers=session
                )
                running = asyncio.ensure_future(http.post(one.url, json=nap, headers=session))
                await until(lambda: (tmp_path / "started").exists(), 60)
                cancelled = await http.post(two.url, json=cancel, headers=session)
                await until(lambda: (tmp_path / "aborted").exists(), 30)
                hushed = await running
                ended = await http.delete(two.url, headers=session)
                gone = await http.post(one.url, json=nap, headers=session)
    finally:
        kill(table)
    assert opened.status_code == 200
    assert listed.status_code == 200  # the session opened on one, found on the other
    assert "a_only" in listed.text
    assert cancelled.status_code == 202
    assert (tmp_path / "aborted").read_text() == "the MCP client cancelled the call"
    assert (hushed.status_code, hushed.content) == (202, b"")  # no reply to a cancelled request
    assert ended.status_code == 200
    assert gone.status_code == 404  # ended on the other replica: ended for all


async def test_two_serve_replicas_share_each_session(mcp_rt: Any) -> None:
    from ray import serve

    from toolray_actors.serve import REPLICA_HEADER, deploy_mcp

    answered_by: list[str] = []

    async def record(response: httpx2.Response) -> None:
        answered_by.append(response.headers.get(REPLICA_HEADER, ""))

    deployment = deploy_mcp(
        mcp_rt,
        auth=BearerTokens(farm.TOKENS),
        scope_per_session=True,
        replicas=2,
        port=free_port(),
        name="test-mcp",
    )
    try:
        hooks = {"response": [record]}
        async with (
            httpx2.AsyncClient(
                headers=bearer("tok-a"), timeout=CLIENT_TIMEOUT, event_hooks=hooks
            ) as http,
            streamable_http_client(deployment.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            scopes = {texts(await session.call_tool("whoami", {}))[0] for _ in range(12)}
            counts = [texts(await session.call_tool("bump", {})) for _ in range(4)]
            assert deployment.sessions_open() == 1
        assert len(scopes) == 1  # one session, one scope, whichever replica answered
        assert counts == [["1"], ["2"], ["3"], ["4"]]  # one environment instance
        assert len({r for r in answered_by if r}) == 2  # both replicas answered this session
        assert deployment.sessions_open() == 0

        # Concurrent clients of one tenant (their batches share messages to one executor).
        async def client(n: int) -> list[str]:
            ms = 10 + 40 * (n % 3)  # batches sent together end at different times
            async with open_session(deployment.url, "tok-b") as session:
                return [texts(await session.call_tool("pause", {"ms": ms}))[0] for _ in range(5)]

        answers = await asyncio.gather(*(client(n) for n in range(12)))
        assert answers == [[str(10 + 40 * (n % 3))] * 5 for n in range(12)]
    finally:
        deployment.shutdown()
        serve.shutdown()


def test_batches_leave_a_replica_as_no_requests_children(ray_runtime: Any) -> None:
    """Ray makes a call sent inside an async actor's method that method's child (Serve
    cancels a request's children when its client leaves); a batch starts without that."""
    import contextvars

    import ray

    from toolray_actors.serve._deploy import _detached

    @ray.remote(num_cpus=0)
    class Request:
        async def names(self) -> tuple[list[str], list[str]]:
            mine = contextvars.ContextVar("mine", default="")
            mine.set("kept")
            here = [var.name for var in contextvars.copy_context()]
            detached = _detached()
            return here, [f"{var.name}={detached[var]}" for var in detached]

    actor = Request.remote()
    here, detached = ray.get(actor.names.remote())
    ray.kill(actor)
    assert "async_task_id" in here  # Ray's record of the running request
    assert "mine=kept" in detached
    assert not [name for name in detached if name.startswith("async_task_")]


def test_per_tenant_metrics_hand_over_increments(ray_runtime: Any) -> None:
    from toolray.adapters.mcp import McpServerStats, TenantStats
    from toolray_actors.serve._metrics import McpMetrics

    def snapshot(requests: int, calls: int, errors: int) -> McpServerStats:
        tenant = TenantStats(requests=requests, calls=calls, call_errors=errors, sessions_opened=1)
        return McpServerStats(
            sessions_open=1,
            sessions_opened=1,
            sessions_closed=0,
            sessions_expired=0,
            calls_in_flight=2,
            tenants={"a": tenant},
        )

    now = [snapshot(3, 2, 1)]
    metrics = McpMetrics(lambda: now[0])
    seen: list[tuple[str, float, dict[str, str]]] = []
    for name in ("requests", "calls", "sessions"):
        counter = getattr(metrics, name)
        counter.inc = lambda by, tags, name=name: seen.append((name, by, tags))
    metrics.flush()
    metrics.flush()  # nothing new: nothing handed over
    now[0] = snapshot(5, 6, 1)
    metrics.flush()
    assert seen == [
        ("requests", 3, {"tenant": "a"}),
        ("calls", 1, {"tenant": "a", "outcome": "ok"}),
        ("calls", 1, {"tenant": "a", "outcome": "error"}),
        ("sessions", 1, {"tenant": "a"}),
        ("requests", 2, {"tenant": "a"}),
        ("calls", 4, {"tenant": "a", "outcome": "ok"}),
    ]
