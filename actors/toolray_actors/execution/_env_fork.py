"""An instance's process copied by a fork: how the copy reaches its worker.

The copy is a grandchild of the source instance's process, to be re-parented to the
worker's template; it has no channel of the template's making. The worker listens on a
one-time abstract unix socket (a random name only this worker and the instance it sent it
to know), the copy connects and announces its pid, and the worker takes the connection only
when the kernel says the peer is that very pid of this user (``SO_PEERCRED``). The template
then adopts the pid (``Template.adopt_async``: a child like those it forks, reaped, reported
and killed through it, not killed as an orphan), and only then is the copy let go of its
intermediate parent.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import struct
from collections.abc import Awaitable, Callable

from toolray.procs import Child

__all__ = ("copy_child",)

_CONNECT_S = 10.0
"""How long the copy has to connect back."""


async def copy_child(
    fork: Callable[[str], Awaitable[int]],
    adopt: Callable[[int, socket.socket], Awaitable[Child]],
) -> Child:
    """The copy as a ``Child``, once its template has adopted it.

    ``fork(address)`` asks the source for the copy and answers its pid; ``adopt(pid,
    connection)`` has the template take it; then the copy is let go of its intermediate.
    """
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
    address = f"toolray-fork-{secrets.token_hex(16)}"
    try:
        listener.bind("\0" + address)
        listener.listen(1)
        pid = await fork(address)
        conn = await asyncio.wait_for(_accept(listener, pid), _CONNECT_S)
    finally:
        listener.close()
    try:
        child = await asyncio.wait_for(adopt(pid, conn), _CONNECT_S)
    except BaseException:
        conn.close()  # the copy reads no "go": it ends, and its intermediate with it
        raise
    conn.sendall(b"\1")  # go: the copy lets its intermediate leave, to be the template's
    return child


async def _accept(listener: socket.socket, pid: int) -> socket.socket:
    """The copy's connection: its announced pid and the kernel's must both be ``pid``."""
    loop = asyncio.get_running_loop()
    while True:
        conn, _ = await loop.sock_accept(listener)
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        peer, uid, _ = struct.unpack("3i", creds)
        conn.setblocking(False)
        announced = int.from_bytes(await loop.sock_recv(conn, 8), "big")
        if peer == pid == announced and uid == os.getuid():
            conn.setblocking(True)
            return conn
        conn.close()  # somebody else: keep waiting for the copy
