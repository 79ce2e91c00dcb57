"""MCP in over HTTP (``http_connector``) against a toolray server; token files; tracing."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolray import TimeoutPolicy, ToolBatchInput, ToolCall, ToolRegistry
from toolray.adapters.mcp import (
    BearerTokens,
    McpConnectError,
    TokenFileError,
    close_http_sessions,
    http_connector,
    import_mcp_tools,
    mcp_http_app,
    mcp_tool_definitions,
    open_http_sessions,
)
from toolray.otel import instrument

from . import _http_tools as farm
from ._http import (
    CLIENT_TIMEOUT,
    MCP_HEADERS,
    bearer,
    free_port,
    list_body,
    open_session,
    serve_app,
    until,
)


def _batch(*calls: ToolCall) -> ToolBatchInput:
    return ToolBatchInput(list(calls))


async def test_round_trip_one_shared_session_and_nothing_left_open() -> None:
    app = mcp_http_app(farm.build(), auth=BearerTokens(farm.TOKENS), stateless=False)
    with serve_app(app) as served:
        connector = http_connector(served.url, headers=bearer("tok-a"))
        local = ToolRegistry()
        for definition in await import_mcp_tools(connector, prefix="farm"):
            local.register(definition)
        calls = [ToolCall(f"c{i}", "farm_add", {"a": i, "b": 1}) for i in range(8)]
        results = await asyncio.gather(*(local.execute_batch(_batch(c)) for c in calls))
        assert [r.results[0].result.value for r in results] == [
            [{"type": "text", "text": str(i + 1)}] for i in range(8)
        ]
        names = {schema["name"] for schema in local.schemas()}
        assert "farm_a_only" in names
        assert "farm_b_only" not in names
        # Another thread, another event loop: the same process, so the same session.
        batch = _batch(ToolCall("other", "farm_add", {"a": 9, "b": 1}))
        other = await asyncio.to_thread(asyncio.run, local.execute_batch(batch))
        assert other.results[0].result.value == [{"type": "text", "text": "10"}]
        assert open_http_sessions() == 1  # every concurrent call shared it
        assert app.stats().sessions_open == 1
        assert app.stats().sessions_opened == 1
        assert await close_http_sessions() == 1
        assert open_http_sessions() == 0
        assert app.stats().sessions_open == 0  # the client said DELETE


_EXITING_CLIENT = """
import asyncio, sys
from toolray import ToolBatchInput, ToolCall, ToolRegistry
from toolray.adapters.mcp import http_connector, import_mcp_tools, open_http_sessions

async def main():
    local = ToolRegistry()
    connector = http_connector(sys.argv[1], headers={"Authorization": "Bearer tok-a"})
    for definition in await import_mcp_tools(connector):
        local.register(definition)
    batch = ToolBatchInput([ToolCall("c1", "add", {"a": 2, "b": 2})])
    result = await local.execute_batch(batch)
    print(result.results[0].result.value[0]["text"], open_http_sessions())

asyncio.run(main())  # and exit without closing anything
"""


async def test_a_process_that_exits_ends_its_session() -> None:
    app = mcp_http_app(farm.build(), auth=BearerTokens(farm.TOKENS), stateless=False)
    with serve_app(app) as served:
        child = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _EXITING_CLIENT, served.url, stdout=asyncio.subprocess.PIPE
        )
        out, _ = await asyncio.wait_for(child.communicate(), 120)
        stats = app.stats()
    assert (child.returncode, out.decode().split()) == (0, ["4", "1"])
    assert stats.sessions_opened == 1
    assert stats.sessions_closed == 1  # told with DELETE as it exited, not left to expire
    assert stats.sessions_open == 0


async def test_a_dropped_connection_is_reopened() -> None:
    port = free_port()
    tokens = BearerTokens(farm.TOKENS)
    local = ToolRegistry()
    with serve_app(mcp_http_app(farm.build(), auth=tokens, stateless=False), port) as served:
        connector = http_connector(served.url, headers=bearer("tok-b"))
        for definition in await import_mcp_tools(connector):
            local.register(definition)
        first = await local.execute_batch(_batch(ToolCall("c1", "add", {"a": 1, "b": 1})))
        assert not first.results[0].result.is_error
    # The server restarts and answers 404 for the session it no longer knows: the request
    # did not run, so it is sent again on a new session.
    with serve_app(mcp_http_app(farm.build(), auth=tokens, stateless=False), port) as again:
        second = await local.execute_batch(_batch(ToolCall("c2", "add", {"a": 2, "b": 2})))
        assert second.results[0].result.value == [{"type": "text", "text": "4"}]
        assert again.app.stats().sessions_open == 1
        await close_http_sessions()
        assert again.app.stats().sessions_open == 0
    assert open_http_sessions() == 0


async def test_a_session_the_server_ended_is_reopened_and_the_call_sent_again() -> None:
    app = mcp_http_app(
        farm.build(), auth=BearerTokens(farm.TOKENS), stateless=False, session_idle_s=0.2
    )
    with serve_app(app) as served:
        local = ToolRegistry()
        for definition in await import_mcp_tools(
            http_connector(served.url, headers=bearer("tok-a"))
        ):
            local.register(definition)
        await until(lambda: app.stats().sessions_expired >= 1)
        # The server answers 404 for the ended session: the call did not run, so it is
        # sent again on a new session.
        result = await local.execute_batch(_batch(ToolCall("c1", "add", {"a": 3, "b": 4})))
        assert result.results[0].result.value == [{"type": "text", "text": "7"}]
        assert app.stats().sessions_opened == 2
        await close_http_sessions()


async def test_an_unreachable_server_fails_after_bounded_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there
    with pytest.raises(McpConnectError, match="cannot be reached"):
        await import_mcp_tools(http_connector(url, connect_attempts=2))
    await close_http_sessions()


async def test_a_server_that_never_answers_ends_at_the_tools_deadline() -> None:
    held: list[asyncio.StreamWriter] = []
    silent = await asyncio.start_server(lambda r, w: held.append(w), "127.0.0.1", 0)  # mute
    port = silent.sockets[0].getsockname()[1]
    app = mcp_http_app(farm.build(), auth=None)
    with serve_app(app) as served:
        async with open_session(served.url, None) as session:
            tools = [t for t in (await session.list_tools()).tools if t.name == "add"]
    connector = http_connector(f"http://127.0.0.1:{port}/mcp")
    (definition,) = mcp_tool_definitions(tools, connector)
    local = ToolRegistry()
    local.register(dataclasses.replace(definition, timeout_ms=300))
    TimeoutPolicy().install(local)
    result = await local.execute_batch(_batch(ToolCall("c1", "add", {"a": 1, "b": 2})))
    info = result.results[0].result.error.info
    assert info is not None
    assert info.code == "TOOL_TIMEOUT"
    await close_http_sessions()
    for writer in held:
        writer.close()
    silent.close()
    await silent.wait_closed()


def test_a_token_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("tok-a a\n")
    path.chmod(0o644)
    with pytest.raises(TokenFileError, match="chmod 600") as raised:
        BearerTokens.from_file(path)
    assert isinstance(raised.value, PermissionError)
    assert isinstance(raised.value, ValueError)
    path.chmod(0o600)
    assert BearerTokens.from_file(path).scopes == frozenset({"a"})


def test_a_malformed_token_file_names_the_line_not_the_token(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("# tenants\ntok-a a\nsecret-without-scope\n")
    path.chmod(0o600)
    with pytest.raises(TokenFileError, match="line 3") as raised:
        BearerTokens.from_file(path)
    assert "secret-without-scope" not in str(raised.value)
    with pytest.raises(TokenFileError, match="No such file"):
        BearerTokens.from_file(tmp_path / "missing")


def test_tokens_pickle_as_digests_only() -> None:
    tokens = BearerTokens({"tok-very-secret": "a"})
    blob = pickle.dumps(tokens)
    assert b"tok-very-secret" not in blob
    again = pickle.loads(blob)
    assert asyncio.run(again.verify_token("tok-very-secret")) is not None


async def test_a_token_removed_from_the_file_is_revoked(tmp_path: Path) -> None:
    path = tmp_path / "tokens"
    path.write_text("tok-a a\ntok-b b\n")
    path.chmod(0o600)
    app = mcp_http_app(farm.build(), auth=BearerTokens.from_file(path))
    with serve_app(app) as served:
        async with httpx2.AsyncClient(headers={**MCP_HEADERS, **bearer("tok-b")}) as http:
            before = await http.post(served.url, json=list_body())
            path.write_text("tok-a a\n")
            os.utime(path, (1, 1))  # a different mtime even within the clock's resolution

            async def revoked() -> bool:
                return (await http.post(served.url, json=list_body())).status_code == 401

            await until(revoked)
    assert before.status_code == 200


async def test_a_request_span_is_a_child_of_the_clients_traceparent() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_id, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    headers = {**bearer("tok-a"), "traceparent": f"00-{trace_id}-{parent}-01"}
    app = mcp_http_app(farm.build(), auth=BearerTokens(farm.TOKENS))
    with instrument(tracer_provider=provider), serve_app(app) as served:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=CLIENT_TIMEOUT) as http,
            _session(served.url, http) as session,
        ):
            await session.call_tool("add", {"a": 1, "b": 2})
    spans = {span.name: span for span in exporter.get_finished_spans()}
    request = spans["tools/call add"]
    assert request.parent is not None
    assert request.parent.span_id == int(parent, 16)
    assert request.context.trace_id == int(trace_id, 16)
    assert dict(request.attributes or {})["toolray.tenant"] == "a"
    batch = spans["toolray batch"]
    assert batch.parent is not None
    assert batch.parent.span_id == request.context.span_id
    stats = app.stats().tenants["a"]
    assert (stats.calls, stats.call_errors) == (1, 0)
    assert stats.requests >= 2  # initialize, tools/call


def _session(url: str, http: Any) -> Any:
    from contextlib import asynccontextmanager

    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    @asynccontextmanager
    async def opened() -> Any:
        async with (
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session

    return opened()
