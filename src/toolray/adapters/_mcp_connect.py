"""MCP in over streamable HTTP: :func:`http_connector`, one pooled session per process.

A connector is a small picklable value (the URL and headers), so definitions made with it
(:func:`import_mcp_tools`) run anywhere: in the registry's process, on a Ray worker, in a
call process. Each process keeps one session per server (URL and headers), shared by every
concurrent call there whatever loop or thread it runs on: the sessions live on the
process's *connection thread*, an event loop of their own started on first use and
declared with ``toolray._held`` — so a call process that used it is still clean, and is
reused with its session rather than retired after the call.

A holder task owns each session: it opens it (``initialize``), keeps it while it works,
and opens it again when it drops (the connection fails, or a restarted server no longer
knows the session), waiting a bounded, doubling delay between attempts (50 ms up to 2 s);
after :attr:`HttpConnector.connect_attempts` failed opens in a row a waiting call fails
with :class:`McpConnectError`. A request the server refused for a session it no longer
knows did not run, so it is sent once more on the new session. A server that accepts the
connection and never answers holds the call until its tool's deadline, like any body.

Sessions end — the server is told with ``DELETE`` — with :meth:`HttpConnector.aclose`,
:func:`close_http_sessions`, or when the process exits normally; a process that is killed
(a Ray worker's call process at shutdown, say) leaves its session to the server's idle
expiry.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar, final

import anyio
import httpx2
import mcp.types as mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolray import AbortError, AbortSignal
from toolray._held import hold_thread
from toolray.errors import ToolrayError

__all__ = (
    "HttpConnector",
    "McpConnectError",
    "call_tool_cancellable",
    "close_http_sessions",
    "http_connector",
    "list_mcp_tools",
    "open_http_sessions",
)

T = TypeVar("T")

_FIRST_DELAY_S: Final = 0.05
_MAX_DELAY_S: Final = 2.0
_CLOSE_S: Final = 5.0
_UNKNOWN_SESSION: Final = ("Session not found", "Session terminated")
"""The SDK's errors for a session the server no longer knows: the request did not run."""
_DROPPED: Final = (*_UNKNOWN_SESSION, "Connection closed")
"""…and for a stream that died (the request may have run)."""

_Key = tuple[str, tuple[tuple[str, str], ...]]


class McpConnectError(ToolrayError, ConnectionError):
    """An MCP server that could not be reached over HTTP after the bounded retries."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConnector:
    """An MCP server over streamable HTTP, reached through this process's pooled session."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    connect_attempts: int = 5
    """Failed opens in a row after which a waiting call fails (the holder keeps trying)."""

    async def list_tools(self) -> list[mcp_types.Tool]:
        """Every tool the server lists (``nextCursor`` pages followed)."""
        return await _connections.run(_through(self, None, list_mcp_tools))

    async def call_tool(
        self, name: str, arguments: dict[str, Any], signal: AbortSignal
    ) -> mcp_types.CallToolResult:
        """Call the server's tool ``name``; ``signal`` cancels it (the server is told)."""

        async def call(session: ClientSession) -> mcp_types.CallToolResult:
            return await call_tool_cancellable(session, name, arguments, signal)

        return await _connections.run(_through(self, signal, call))

    async def aclose(self) -> None:
        """End this process's session on this server (the server is told with ``DELETE``)."""
        if _connections.started():
            await _connections.run(_connections.close((self.url, self.headers)))


def http_connector(
    url: str, *, headers: Mapping[str, str] | None = None, connect_attempts: int = 5
) -> HttpConnector:
    """A connector to the MCP server at ``url`` (streamable HTTP), for ``import_mcp_tools``.

    Args:
        url: the server's MCP endpoint (``http://host:port/mcp``).
        headers: sent with every request (``{"Authorization": "Bearer …"}``); they travel
            with the definitions to the processes that run them.
        connect_attempts: failed opens in a row before a waiting call fails.

    Example:
        >>> connector = http_connector(
        ...     "http://127.0.0.1:8000/mcp", headers={"Authorization": "Bearer t0ken"})
        >>> connector.url
        'http://127.0.0.1:8000/mcp'
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"http_connector takes an http(s) URL, not {url!r}")
    if connect_attempts < 1:
        raise ValueError("connect_attempts is at least 1")
    pairs = tuple(sorted((str(k), str(v)) for k, v in (headers or {}).items()))
    return HttpConnector(url=url, headers=pairs, connect_attempts=connect_attempts)


def open_http_sessions() -> int:
    """How many HTTP client sessions this process holds open (every server)."""
    return sum(1 for holder in list(_connections.holders.values()) if holder.live is not None)


async def close_http_sessions() -> int:
    """End every session this process holds (each server is told); how many there were."""
    if not _connections.started():
        return 0
    return await _connections.run(_connections.close_all())


async def list_mcp_tools(session: ClientSession) -> list[mcp_types.Tool]:
    """Every tool the server lists, following ``nextCursor`` pages."""
    tools: list[mcp_types.Tool] = []
    params: mcp_types.PaginatedRequestParams | None = None
    while True:
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        if not page.next_cursor:
            return tools
        params = mcp_types.PaginatedRequestParams(cursor=page.next_cursor)


async def call_tool_cancellable(
    session: ClientSession, name: str, arguments: dict[str, Any], signal: AbortSignal
) -> mcp_types.CallToolResult:
    """``session.call_tool``, cancelled when ``signal`` fires.

    Cancelling the request makes the SDK send ``notifications/cancelled`` to the server.

    Raises:
        AbortError: the signal fired (or its reason, when that is an exception).
    """
    signal.throw_if_aborted()
    loop = asyncio.get_running_loop()
    with anyio.CancelScope() as scope:
        stop = signal.add_listener(lambda: loop.call_soon_threadsafe(scope.cancel))
        try:
            return await session.call_tool(name, arguments)
        finally:
            stop()
    signal.throw_if_aborted()
    raise AbortError()  # only the signal cancels this scope


def is_dropped(err: BaseException) -> bool:
    """Whether a request's error means its session is gone (the next needs a new one)."""
    if isinstance(err, MCPError):
        return any(text in err.error.message for text in _DROPPED)
    return isinstance(
        err, httpx2.TransportError | anyio.ClosedResourceError | anyio.BrokenResourceError
    )


def never_ran(err: BaseException) -> bool:
    """Whether the server refused the request for its session (so it is safe to send again)."""
    return isinstance(err, MCPError) and any(t in err.error.message for t in _UNKNOWN_SESSION)


# ------------------------------------------------------------ on the connection thread
async def _through(
    connector: HttpConnector,
    signal: AbortSignal | None,
    request: Callable[[ClientSession], Awaitable[T]],
) -> T:
    """``request`` on the pooled session; a session that dropped is reopened (see above)."""
    holder = _connections.holder(connector)
    for attempt in (1, 2):
        session = await _opened(holder, signal)
        try:
            return await request(session)
        except Exception as err:
            if not is_dropped(err):
                raise
            holder.drop(session)
            if attempt == 2 or not never_ran(err):
                raise
    raise AssertionError("unreachable")


async def _opened(holder: _Holder, signal: AbortSignal | None) -> ClientSession:
    """The holder's live session, given up when ``signal`` fires (a server that never answers)."""
    if signal is None:
        return await holder.session()
    signal.throw_if_aborted()
    loop = asyncio.get_running_loop()
    with anyio.CancelScope() as scope:
        stop = signal.add_listener(lambda: loop.call_soon_threadsafe(scope.cancel))
        try:
            return await holder.session()
        finally:
            stop()
    signal.throw_if_aborted()
    raise AbortError()


@final
class _Connections:
    """This process's connection thread: an event loop holding every pooled session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self.holders: dict[_Key, _Holder] = {}
        """By server; read and changed on the connection thread only (counted anywhere)."""

    def started(self) -> bool:
        return self._loop is not None and self._pid == os.getpid()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # first use, or a forked child
                self._pid, self.holders = os.getpid(), {}
                self._loop = loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="toolray-mcp-connections", daemon=True
                )
                hold_thread(thread)
                thread.start()
            return self._loop

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the connection thread; cancelling the caller cancels it there."""
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._running_loop())
        except BaseException:
            coro.close()
            raise
        return await asyncio.wrap_future(future)

    def holder(self, connector: HttpConnector) -> _Holder:
        key = (connector.url, connector.headers)
        holder = self.holders.get(key)
        if holder is None:
            holder = self.holders[key] = _Holder(connector)
        return holder

    async def close(self, key: _Key) -> int:
        holder = self.holders.pop(key, None)
        if holder is None:
            return 0
        await holder.aclose()
        return 1

    async def close_all(self) -> int:
        closed = await asyncio.gather(*(self.close(key) for key in list(self.holders)))
        return sum(closed)

    def close_at_exit(self) -> None:
        """The interpreter exits normally: end every session (bounded), stop the thread."""
        loop = self._loop
        if loop is None or self._pid != os.getpid() or not loop.is_running():
            return
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(self.close_all(), loop).result(_CLOSE_S + 1)
        loop.call_soon_threadsafe(loop.stop)


_connections = _Connections()
atexit.register(_connections.close_at_exit)


@final
class _Holder:
    """One session on one server: opened, kept, reopened, closed (on the connection loop)."""

    def __init__(self, connector: HttpConnector) -> None:
        self._connector = connector
        self.live: ClientSession | None = None
        self._changed = asyncio.Event()
        self._drop = asyncio.Event()
        self._failures = 0
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def session(self) -> ClientSession:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._hold())
        while self.live is None:
            if self._failures >= self._connector.connect_attempts:
                raise McpConnectError(
                    f"the MCP server at {self._connector.url} cannot be reached "
                    f"({self._failures} attempts): {self._error}"
                )
            self._changed.clear()
            await self._changed.wait()
        return self.live

    def drop(self, session: ClientSession) -> None:
        if session is self.live:
            self.live = None  # no caller gets it again while the holder replaces it
            self._drop.set()

    async def _hold(self) -> None:
        delay = _FIRST_DELAY_S
        while not self._closing:
            try:
                await self._open_and_keep()
                delay = _FIRST_DELAY_S
            except Exception as err:  # a refused or broken connection: try again, later
                if self._closing:
                    return
                self._error = err
                self._failures += 1
                self._announce(None)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _MAX_DELAY_S)

    async def _open_and_keep(self) -> None:
        headers = dict(self._connector.headers)
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(self._connector.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            self._failures = 0
            self._drop.clear()
            self._announce(session)
            try:
                await self._drop.wait()
            finally:
                self._announce(None)

    def _announce(self, session: ClientSession | None) -> None:
        self.live = session
        self._changed.set()

    async def aclose(self) -> None:
        """Leave the session as a client does (``DELETE``), then stop; cancel if it hangs."""
        task, self._task = self._task, None
        if task is None:
            return
        self._closing = True
        self._drop.set()
        with anyio.move_on_after(_CLOSE_S):
            await asyncio.shield(task)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        self.live = None
