"""Open an SDK ``ClientSession`` on a test server script run as a stdio subprocess."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
IMPORT_SERVER = HERE / "_mcp_server.py"
SERVE_SERVER = HERE / "_serve_server.py"


@asynccontextmanager
async def open_session(script: Path, log: Path) -> AsyncIterator[ClientSession]:
    """An initialized session on ``python <script>``; the server's stderr goes to ``log``."""
    params = StdioServerParameters(command=sys.executable, args=[str(script)], cwd=str(HERE))
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session
