"""A worker's lane in a process of its own (the unit tests SIGKILL it as a worker dies).

Prints ``{"name": hex, "secret": hex}`` once listening; every message it gets hangs.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

from toolray_actors.execution._lane import LaneServer


async def _hang(payload: bytes) -> AsyncIterator[bytes]:
    yield b"started:" + payload
    await asyncio.Event().wait()


async def main() -> None:
    address = await LaneServer(_hang).open("node")
    print(json.dumps({"name": address.name.hex(), "secret": address.secret.hex()}), flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
