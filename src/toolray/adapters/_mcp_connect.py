"""MCP in over streamable HTTP: :func:`http_connector`, one pooled session per process.

A connector is a small picklable value (the URL and headers), so definitions made with it
(:func:`import_mcp_tools`) run anywhere: in the registry's process, on a Ray worker, in a
call process. Calling it returns the process's live ``ClientSession`` for that server (one
per URL, headers and event loop), shared by every concurrent call there. A holder task owns
the session: it opens it (``initialize``), keeps it while it works, and opens it again when
it drops (the connection fails, or a restarted server no longer knows the session), waiting
a bounded, doubling delay between attempts (50 ms up to 2 s); after
:attr:`HttpConnector.connect_attempts` failed opens in a row a waiting call fails with
:class:`McpConnectError`. A server that accepts the connection and never answers holds the
call until its tool's deadline, like any body. :meth:`HttpConnector.aclose` (or
:func:`close_http_sessions`) ends the sessions (the server is told with ``DELETE``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final

import anyio
import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from toolray.errors import ToolrayError

__all__ = (
    "HttpConnector",
    "McpConnectError",
    "close_http_sessions",
    "http_connector",
    "open_http_sessions",
)

_FIRST_DELAY_S: Final = 0.05
_MAX_DELAY_S: Final = 2.0
_CLOSE_S: Final = 5.0
_UNKNOWN_SESSION: Final = ("Session not found", "Session terminated")
"""The SDK's errors for a session the server no longer knows: the request did not run."""
_DROPPED: Final = (*_UNKNOWN_SESSION, "Connection closed")
"""…and for a stream that died (the request may have run)."""


class McpConnectError(ToolrayError, ConnectionError):
    """An MCP server that could not be reached over HTTP after the bounded retries."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpConnector:
    """Opens (once per process and event loop) and returns a session on an MCP HTTP server."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()
    connect_attempts: int = 5
    """Failed opens in a row after which a waiting call fails (the holder keeps trying)."""

    async def __call__(self) -> ClientSession:
        """The live session of this process for this server (opened on first use)."""
        return await _holder(self).session()

    def dropped(self, session: ClientSession) -> None:
        """Tell the holder that ``session`` failed as a dropped one: open a new one."""
        holder = _holders.get(_key(self))
        if holder is not None:
            holder.drop(session)

    async def aclose(self) -> None:
        """End this process's session on the server (for the running event loop)."""
        holder = _holders.pop(_key(self), None)
        if holder is not None:
            await holder.aclose()


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


def is_dropped(err: BaseException) -> bool:
    """Whether a call's error means its session is gone (and the next one needs a new one)."""
    if isinstance(err, MCPError):
        return any(text in err.error.message for text in _DROPPED)
    return isinstance(
        err, httpx2.TransportError | anyio.ClosedResourceError | anyio.BrokenResourceError
    )


def never_ran(err: BaseException) -> bool:
    """Whether the server refused the request for its session (so it is safe to send again)."""
    return isinstance(err, MCPError) and any(t in err.error.message for t in _UNKNOWN_SESSION)


_holders: dict[tuple[str, tuple[tuple[str, str], ...], int], _Holder] = {}


def _key(connector: HttpConnector) -> tuple[str, tuple[tuple[str, str], ...], int]:
    return (connector.url, connector.headers, id(asyncio.get_running_loop()))


def _holder(connector: HttpConnector) -> _Holder:
    key = _key(connector)
    holder = _holders.get(key)
    if holder is None:
        holder = _holders[key] = _Holder(connector)
    return holder


def open_http_sessions() -> int:
    """How many HTTP client sessions this process holds open (every loop, every server)."""
    return sum(1 for holder in _holders.values() if holder.live is not None)


async def close_http_sessions() -> int:
    """End every session the running event loop holds; how many holders there were."""
    loop = id(asyncio.get_running_loop())
    mine = [key for key in _holders if key[2] == loop]
    for key in mine:
        await _holders.pop(key).aclose()
    return len(mine)


@final
class _Holder:
    """One session on one server for one event loop: opened, kept, reopened, closed."""

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
