"""A real MCP HTTP server on 127.0.0.1 (uvicorn in a thread), and real SDK clients of it."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

WAIT_S = 30
CLIENT_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""As the SDK's own client (httpx's default 5 s read timeout would end a slow call's stream)."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    """A running server: its MCP URL, its app and the loop its tool bodies run on."""

    url: str
    app: Any
    loop: asyncio.AbstractEventLoop

    def run(self, coro: Any) -> Any:
        """Run ``coro`` on the server's loop (where its bodies and events live)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(WAIT_S)


@contextmanager
def serve_app(app: Any, port: int | None = None) -> Iterator[Served]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread of its own until the block ends."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", loop="asyncio")
    server = uvicorn.Server(config)
    ready = threading.Event()
    loops: list[asyncio.AbstractEventLoop] = []

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        task = asyncio.ensure_future(server.serve())
        for _ in range(WAIT_S * 100):  # bounded: uvicorn says nothing but its flag
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        ready.set()
        await task

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    assert ready.wait(WAIT_S), "the server did not start"
    assert server.started, "the server did not start"
    try:
        yield Served(url=f"http://127.0.0.1:{port}/mcp", app=app, loop=loops[0])
    finally:
        server.should_exit = True
        thread.join(WAIT_S)
        assert not thread.is_alive(), "the server did not stop"


async def until(predicate: Any, timeout_s: float = 10.0) -> None:
    """Poll observable state (bounded) until ``predicate()`` holds."""
    for _ in range(int(timeout_s / 0.02)):
        if await predicate() if asyncio.iscoroutinefunction(predicate) else predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"still false after {timeout_s} s: {predicate}")


def bearer(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token is not None else {}


@asynccontextmanager
async def open_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    """An initialized SDK session over streamable HTTP (the handshake revisions)."""
    async with (
        httpx2.AsyncClient(headers=bearer(token), timeout=CLIENT_TIMEOUT) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content if getattr(block, "type", "") == "text"]


MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def initialize_body(request_id: int = 0) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def list_body(request_id: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list", "params": {}}
