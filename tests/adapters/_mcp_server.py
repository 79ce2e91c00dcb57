"""An MCP stdio server built with the SDK's ``MCPServer``, for the import tests.

Run as a script (``python _mcp_server.py``). Server-side events make the tests
deterministic: ``wait_started`` returns once ``hang`` runs, ``cancellations`` once the
server has seen ``hang`` cancelled, and ``rendezvous`` returns only when two calls are in it
at once (so it fails, rather than hangs, when calls do not run in parallel).
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

app = MCPServer("toolray-test-server")
_events: dict[str, Any] = {}
_arrivals: list[str] = []
READ_ONLY = ToolAnnotations(read_only_hint=True)
WAIT_S = 10


def _event(name: str) -> anyio.Event:
    if name not in _events:
        _events[name] = anyio.Event()
    return _events[name]  # type: ignore[no-any-return]


class Sum(BaseModel):
    total: int


@app.tool()
def add(a: int, b: int) -> Sum:
    """Add two integers."""
    return Sum(total=a + b)


@app.tool(structured_output=False)
def count(n: Annotated[int, Field(ge=1, le=5, description="How many")]) -> str:
    """Count up to n (at most 5)."""
    return " ".join(str(i) for i in range(1, n + 1))


@app.tool(structured_output=False)
def picture() -> list[TextContent | ImageContent]:
    """A caption and a tiny image."""
    return [TextContent(text="a pixel"), ImageContent(data="iVBORw0KGgo=", mime_type="image/png")]


@app.tool(structured_output=False)
def explode(reason: str) -> str:
    """Always fails."""
    raise ToolError(f"exploded: {reason}")


@app.tool(annotations=READ_ONLY, structured_output=False)
async def rendezvous(name: str) -> str:
    """Returns once two calls are inside at the same time."""
    _arrivals.append(name)
    if len(_arrivals) % 2 == 0:
        _event(f"pair-{len(_arrivals) // 2}").set()
    with anyio.move_on_after(WAIT_S):
        await _event(f"pair-{(len(_arrivals) + 1) // 2}").wait()
        return f"{name} met someone"
    raise ToolError(f"{name} waited {WAIT_S}s alone: calls did not run in parallel")


@app.tool(structured_output=False)
async def hang() -> str:
    """Runs until cancelled; records that the server saw the cancellation."""
    _event("started").set()
    try:
        await anyio.sleep_forever()
    finally:
        _event("cancelled").set()
    return "unreachable"


@app.tool(annotations=READ_ONLY, structured_output=False)
async def wait_started() -> str:
    """Returns once ``hang`` is running."""
    with anyio.fail_after(WAIT_S):
        await _event("started").wait()
    return "started"


@app.tool(annotations=READ_ONLY, structured_output=False)
async def cancellations() -> str:
    """Returns once the server has seen ``hang`` cancelled."""
    with anyio.fail_after(WAIT_S):
        await _event("cancelled").wait()
    return "cancelled"


if __name__ == "__main__":
    app.run()
