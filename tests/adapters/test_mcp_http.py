"""``mcp_http_app`` on the in-process backend: a real server on 127.0.0.1, real SDK clients.

Tenancy is tried every way across: another tenant's tool name, a forged session id, another
token's session id, a token for a parent scope, no token, a wrong one, an expired one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AccessToken
from mcp.shared.exceptions import MCPError

from toolray.adapters.mcp import BearerTokens, mcp_http_app

from . import _http_tools as farm
from ._http import (
    MCP_HEADERS,
    Served,
    bearer,
    initialize_body,
    list_body,
    open_session,
    serve_app,
    texts,
    until,
)


@pytest.fixture(scope="module")
def stateless() -> Iterator[Served]:
    app = mcp_http_app(farm.build(), auth=BearerTokens(farm.TOKENS), max_body_bytes=64_000)
    with serve_app(app) as served:
        yield served


@pytest.fixture(scope="module")
def per_session() -> Iterator[Served]:
    app = mcp_http_app(farm.build(), auth=BearerTokens(farm.TOKENS), scope_per_session=True)
    with serve_app(app) as served:
        yield served


async def test_a_tenant_lists_and_calls_its_own_tools(stateless: Served) -> None:
    async with open_session(stateless.url, "tok-a") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        added = await session.call_tool("add", {"a": 2, "b": 3})
        where = await session.call_tool("whoami", {})
        own = await session.call_tool("a_only", {})
    assert "a_only" in names
    assert "add" in names
    assert not {"b_only", "team_only"} & names
    assert (added.is_error, texts(added)) == (False, ["5"])
    assert texts(where) == ["a"]
    assert texts(own) == ["a_only ran"]


async def test_another_tenants_tool_is_an_unknown_tool(stateless: Served) -> None:
    async with open_session(stateless.url, "tok-a") as session:
        theirs = await session.call_tool("b_only", {})
        nowhere = await session.call_tool("no_such_tool", {})
    assert theirs.is_error
    assert nowhere.is_error
    assert texts(theirs) == ['Error: unknown tool "b_only"']
    assert texts(nowhere) == ['Error: unknown tool "no_such_tool"']  # the same answer


async def test_a_token_for_a_parent_scope_sees_no_child_scope_tool(stateless: Served) -> None:
    async with open_session(stateless.url, "tok-org") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        child = await session.call_tool("team_only", {})
    assert "team_only" not in names
    assert texts(child) == ['Error: unknown tool "team_only"']


async def test_a_tool_failure_is_an_error_result_with_the_pipelines_text(stateless: Served) -> None:
    async with open_session(stateless.url, "tok-b") as session:
        crashed, added = await asyncio.gather(
            session.call_tool("crash", {}), session.call_tool("add", {"a": 1, "b": 1})
        )
        invalid = await session.call_tool("add", {"a": "two"})
    assert crashed.is_error
    assert texts(crashed) == ["Error: the crash tool crashed"]
    assert (added.is_error, texts(added)) == (False, ["2"])  # the peer call is untouched
    assert invalid.is_error
    assert texts(invalid)[0].startswith("Error: invalid arguments")


async def test_a_slow_body_ends_at_its_deadline(stateless: Served) -> None:
    # A body that ignores its deadline is killed on Ray (tests/actors/test_mcp_serve.py).
    async with open_session(stateless.url, "tok-a") as session:
        hung = await session.call_tool("slow", {})
        after = await session.call_tool("add", {"a": 1, "b": 2})
    assert hung.is_error
    assert "timed out" in texts(hung)[0]
    assert texts(after) == ["3"]


@pytest.mark.parametrize("served", ["stateless", "per_session"])
async def test_a_client_cancel_aborts_the_call(served: str, request: pytest.FixtureRequest) -> None:
    server: Served = request.getfixturevalue(served)
    key = f"cancel-{served}"
    async with open_session(server.url, "tok-a") as session:
        waiting = asyncio.ensure_future(session.call_tool("wait", {"key": key}))
        assert texts(await session.call_tool("wait_started", {"key": key})) == ["started"]
        waiting.cancel()  # the SDK posts notifications/cancelled
        with pytest.raises(asyncio.CancelledError):
            await waiting
        reason = await session.call_tool("abort_seen", {"key": key})
    assert texts(reason) == ["the MCP client cancelled the call"]


async def test_a_cancelled_request_gets_no_reply_its_post_is_answered_202(
    stateless: Served,
) -> None:
    """The MCP specification: no response to a cancelled request (a client that left its
    session meanwhile would otherwise get the aborted call's reply on a closed stream)."""

    def body(request_id: int, name: str) -> dict[str, object]:
        params = {"name": name, "arguments": {"key": "hush"}}
        return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}

    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    headers = {**MCP_HEADERS, **bearer("tok-a")}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        waiting = asyncio.ensure_future(http.post(stateless.url, json=body(5, "wait")))
        started = await http.post(stateless.url, json=body(6, "wait_started"))
        cancelled = await http.post(stateless.url, json=cancel)
        hushed = await waiting
        seen = await http.post(stateless.url, json=body(7, "abort_seen"))
        after = await http.post(stateless.url, json=body(8, "abort_seen"))
    assert (started.status_code, cancelled.status_code) == (200, 202)
    assert (hushed.status_code, hushed.content) == (202, b"")
    assert "the MCP client cancelled the call" in seen.text
    assert after.status_code == 200  # an answered request is not hushed by the one before


async def test_no_wrong_or_expired_token_is_401_with_www_authenticate(stateless: Served) -> None:
    async with httpx2.AsyncClient() as http:
        missing = await http.post(stateless.url, json=list_body(), headers=MCP_HEADERS)
        wrong = await http.post(
            stateless.url, json=list_body(), headers={**MCP_HEADERS, **bearer("tok-guess")}
        )
    for answer in (missing, wrong):
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"].startswith('Bearer error="invalid_token"')

    class Expired:
        async def verify_token(self, token: str) -> AccessToken | None:
            return AccessToken(token=token, client_id="c", scopes=[], expires_at=1)

    with serve_app(mcp_http_app(farm.build(), auth=Expired())) as served:
        async with httpx2.AsyncClient() as http:
            expired = await http.post(
                served.url, json=list_body(), headers={**MCP_HEADERS, **bearer("old")}
            )
    assert expired.status_code == 401


async def test_a_body_over_the_limit_is_413(stateless: Served) -> None:
    big = {**list_body(), "params": {"padding": "x" * 70_000}}
    async with httpx2.AsyncClient(headers={**MCP_HEADERS, **bearer("tok-a")}) as http:
        answer = await http.post(stateless.url, json=big)
        fits = await http.post(stateless.url, json=initialize_body())
    assert answer.status_code == 413
    assert fits.status_code == 200
    assert fits.headers["content-type"] == "application/json"  # one body, no SSE stream


async def test_dns_rebinding_hosts_and_origins_are_refused(stateless: Served) -> None:
    async with httpx2.AsyncClient(headers={**MCP_HEADERS, **bearer("tok-a")}) as http:
        host = await http.post(
            stateless.url, json=initialize_body(), headers={"Host": "evil.example"}
        )
        origin = await http.post(
            stateless.url, json=initialize_body(), headers={"Origin": "http://evil.example"}
        )
    assert host.status_code == 421
    assert origin.status_code == 403


async def test_a_2026_client_is_served_stateless(stateless: Served) -> None:
    async with (
        httpx2.AsyncClient(headers=bearer("tok-b")) as http,
        Client(streamable_http_client(stateless.url, http_client=http)) as client,
    ):
        where = await client.call_tool("whoami", {})
        assert client.session.protocol_version == "2026-07-28"
    assert texts(where) == ["b"]


async def test_each_session_calls_in_its_own_scope_with_its_own_environment(
    per_session: Served,
) -> None:
    registry = per_session.app._core.registry
    async with open_session(per_session.url, "tok-a") as one:
        first = texts(await one.call_tool("whoami", {}))[0]
        assert [texts(await one.call_tool("bump", {})) for _ in range(2)] == [["1"], ["2"]]
        async with open_session(per_session.url, "tok-a") as two:
            second = texts(await two.call_tool("whoami", {}))[0]
            assert texts(await two.call_tool("bump", {})) == ["1"]  # not the other's state
            assert texts(await two.call_tool("a_only", {})) == ["a_only ran"]  # the tenant's
        status = registry.environment("counter", scope=first).status_sync()
        assert status.state == "open"
    assert first.startswith("a/mcp-")
    assert second.startswith("a/mcp-")
    assert first != second
    # Both sessions ended (the client sends DELETE): their scopes and instances are gone.
    closed = registry.environment("counter", scope=first).status_sync()
    assert closed.state == "closed"
    assert {"n": 2} in farm.CLOSED
    assert {"n": 1} in farm.CLOSED


async def test_a_forged_or_foreign_session_id_is_404(per_session: Served) -> None:
    headers = {**MCP_HEADERS, "mcp-protocol-version": "2025-11-25"}
    async with (
        httpx2.AsyncClient(headers={**headers, **bearer("tok-a")}) as mine,
        httpx2.AsyncClient(headers={**headers, **bearer("tok-a2")}) as same_tenant,
        httpx2.AsyncClient(headers={**headers, **bearer("tok-b")}) as other,
    ):
        opened = await mine.post(per_session.url, json=initialize_body())
        session_id = opened.headers["mcp-session-id"]
        forged = await mine.post(
            per_session.url, json=list_body(), headers={"mcp-session-id": "0" * 32}
        )
        answers = [
            await client.post(
                per_session.url, json=list_body(), headers={"mcp-session-id": session_id}
            )
            for client in (same_tenant, other)
        ]
        no_session = await mine.post(per_session.url, json=list_body())
        stream = await mine.get(per_session.url, headers={"mcp-session-id": session_id})
        ended = await mine.delete(per_session.url, headers={"mcp-session-id": session_id})
        after = await mine.post(
            per_session.url, json=list_body(), headers={"mcp-session-id": session_id}
        )
    assert opened.status_code == 200
    assert forged.status_code == 404
    assert [a.status_code for a in answers] == [404, 404]  # bound to the token that opened it
    assert no_session.status_code == 400
    assert stream.status_code == 405
    assert ended.status_code == 200
    assert after.status_code == 404


async def test_an_idle_session_ends_and_its_scope_is_disposed() -> None:
    registry = farm.build()
    app = mcp_http_app(
        registry, auth=BearerTokens(farm.TOKENS), scope_per_session=True, session_idle_s=0.2
    )
    with serve_app(app) as served:
        async with open_session(served.url, "tok-b") as session:
            long_call = await session.call_tool("slow", {})  # 300 ms: longer than the idle time
            assert "timed out" in texts(long_call)[0]  # its deadline, not the session's end
            where = texts(await session.call_tool("whoami", {}))[0]
            assert texts(await session.call_tool("bump", {})) == ["1"]
            await until(lambda: app.stats().sessions_expired == 1)
            with pytest.raises(MCPError, match="Session not found"):
                await session.call_tool("whoami", {})
        assert registry.environment("counter", scope=where).status_sync().state == "closed"
    assert app.stats().sessions_open == 0


async def test_a_runtime_failure_is_an_error_result_not_a_protocol_error() -> None:
    from toolray.errors import ToolrayError

    class Broken:
        """A registry whose runtime is gone (as a Ray namespace that ended)."""

        def __init__(self) -> None:
            self._inner = farm.build()

        def schemas(self, scope: str | None = None) -> list[dict[str, object]]:
            return self._inner.schemas(scope)

        async def execute_batch(self, batch: object) -> object:
            raise ToolrayError("the namespace ended")

    with serve_app(mcp_http_app(Broken(), auth=None)) as served:
        async with open_session(served.url, None) as session:
            result = await session.call_tool("add", {"a": 1, "b": 2})
    assert result.is_error
    assert texts(result) == ["Error: the namespace ended"]
