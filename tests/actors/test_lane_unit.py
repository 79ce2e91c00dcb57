"""The local lane without Ray: a worker's ``LaneServer`` and an executor's ``LaneClient``.

Real sockets in the abstract namespace, real processes where a peer must be one (a worker
SIGKILLed mid-message, a peer of another user). Nothing waits on time except the one test
of the hello deadline, which shortens it.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import struct
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolray_actors.execution import _lane
from toolray_actors.execution._lane import (
    HELLO,
    RUN,
    LaneAddress,
    LaneClient,
    LaneError,
    LaneServer,
    frame,
)

from ._procs import ROOT, child_env

GUARD_S = 30.0
"""How long a test waits for what must happen before it fails (never a synchronisation)."""


class Died(Exception):
    """The cause a test's ``lost`` callback gives."""


class Body:
    """A worker's ``run``: chunks derived from the payload; ``b"bad"`` fails the message,
    ``b"hang"`` waits until cancelled (and says so)."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.started = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def __call__(self, payload: bytes) -> AsyncIterator[bytes]:
        self.payloads.append(payload)
        if payload == b"bad":
            raise ValueError("this message cannot run")
        if payload == b"hang":
            self.started.set()
            try:
                await asyncio.Event().wait()
            finally:
                self.cancelled.set()
        for i in range(3):
            yield payload + b":%d" % i


class Lost:
    """A client's ``lost`` callback that counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    async def __call__(self) -> BaseException:
        self.asked += 1
        return Died("the worker is gone")


async def collect(items: AsyncIterator[bytes]) -> list[bytes]:
    return [item async for item in items]


def abstract_names() -> set[str]:
    lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    return {line.split()[-1] for line in lines if len(line.split()) >= 8}


async def test_messages_cross_each_gets_its_own_chunks_and_the_socket_leaves_no_file() -> None:
    body = Body()
    server = LaneServer(body)
    address = await server.open("node-a")
    assert address.node == "node-a"
    assert address.name.startswith(b"\0toolray-lane-")  # abstract: no file to leave behind
    assert "@" + address.name[1:].decode() in abstract_names()
    client = await LaneClient.connect(address, Lost())
    first, second = client.deliver(b"one"), client.deliver(b"two")
    got = await asyncio.wait_for(asyncio.gather(collect(first), collect(second)), GUARD_S)
    assert got == [[b"one:0", b"one:1", b"one:2"], [b"two:0", b"two:1", b"two:2"]]
    assert (server.connections, server.messages) == (1, 2)
    client.close()
    server.close()


def test_both_ends_work_on_uvloop_which_ray_runs_async_actors_on_when_installed() -> None:
    import uvloop  # the serve extra (Ray Serve's uvicorn) installs it

    async def round_trip() -> list[bytes]:
        assert "uvloop" in type(asyncio.get_running_loop()).__module__
        server = LaneServer(Body())
        try:
            client = await LaneClient.connect(await server.open("n"), Lost())
            try:
                return await asyncio.wait_for(collect(client.deliver(b"uv")), GUARD_S)
            finally:
                client.close()
        finally:
            server.close()

    assert uvloop.run(round_trip()) == [b"uv:0", b"uv:1", b"uv:2"]


async def test_a_failing_message_fails_alone_and_the_lane_goes_on() -> None:
    server = LaneServer(Body())
    client = await LaneClient.connect(await server.open("n"), Lost())
    with pytest.raises(LaneError, match="ValueError: this message cannot run"):
        await asyncio.wait_for(collect(client.deliver(b"bad")), GUARD_S)
    assert await asyncio.wait_for(collect(client.deliver(b"ok")), GUARD_S) == [
        b"ok:0",
        b"ok:1",
        b"ok:2",
    ]
    assert not client.closed
    client.close()
    server.close()


async def test_a_wrong_secret_is_closed_before_any_message_runs() -> None:
    body = Body()
    server = LaneServer(body)
    real = await server.open("n")
    lost = Lost()
    forged = LaneAddress(real.node, real.name, bytes(len(real.secret)))
    with pytest.raises(LaneError, match="the worker did not open its lane"):
        await asyncio.wait_for(LaneClient.connect(forged, lost), GUARD_S)
    assert body.payloads == []
    assert (server.connections, server.messages, lost.asked) == (0, 0, 0)
    server.close()


async def test_a_client_sends_no_message_before_its_hello_is_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_lane, "_HELLO_S", 0.05)
    heard: list[bytes] = []
    done = asyncio.Event()

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.read())  # everything the client sends until it gives up
        writer.close()
        done.set()

    name = b"\0toolray-lane-test-" + os.urandom(8).hex().encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(name)
    server = await asyncio.start_unix_server(mute, sock=sock)
    with pytest.raises(TimeoutError):
        await LaneClient.connect(LaneAddress("n", name, b"s" * 32), Lost())
    await asyncio.wait_for(done.wait(), GUARD_S)
    assert heard == [frame(HELLO, 0, b"s" * 32)]  # the hello only: no message was at stake
    server.close()


async def test_every_open_message_learns_the_one_cause_when_the_worker_is_killed() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.actors._lane_server",
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
        env=child_env(),
    )
    assert proc.stdout is not None
    try:
        said = json.loads(await asyncio.wait_for(proc.stdout.readline(), GUARD_S))
        address = LaneAddress("n", bytes.fromhex(said["name"]), bytes.fromhex(said["secret"]))
        lost = Lost()
        client = await LaneClient.connect(address, lost)
        streams = [client.deliver(b"m%d" % i) for i in range(3)]
        firsts = [await asyncio.wait_for(anext(s), GUARD_S) for s in streams]
        assert firsts == [b"started:m0", b"started:m1", b"started:m2"]  # all three run
        proc.send_signal(signal.SIGKILL)
        for stream in streams:
            with pytest.raises(Died):
                await asyncio.wait_for(anext(stream), GUARD_S)
        assert lost.asked == 1  # one question for every message of the connection
        assert client.closed
        with pytest.raises(Died):  # a message after the end learns the same cause
            await asyncio.wait_for(collect(client.deliver(b"late")), GUARD_S)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def test_an_executor_that_goes_cancels_its_messages_in_the_worker() -> None:
    body = Body()
    server = LaneServer(body)
    client = await LaneClient.connect(await server.open("n"), Lost())
    stream = client.deliver(b"hang")
    await asyncio.wait_for(body.started.wait(), GUARD_S)
    client.close()
    await asyncio.wait_for(body.cancelled.wait(), GUARD_S)  # its calls are abandoned
    with pytest.raises(Died):
        await asyncio.wait_for(anext(stream), GUARD_S)
    server.close()


async def test_an_oversized_frame_ends_only_its_own_connection() -> None:
    body = Body()
    server = LaneServer(body)
    address = await server.open("n")
    reader, writer = await asyncio.open_unix_connection(address.name)  # type: ignore[arg-type]
    writer.write(frame(HELLO, 0, address.secret))
    writer.write(struct.pack("!IBI", (1 << 30) + 1, RUN, 1))
    said = await asyncio.wait_for(reader.read(), GUARD_S)
    assert said == frame(HELLO, 0)  # the hello's answer, then closed
    good = await LaneClient.connect(address, Lost())
    assert await asyncio.wait_for(collect(good.deliver(b"x")), GUARD_S) == [b"x:0", b"x:1", b"x:2"]
    assert body.payloads == [b"x"]
    good.close()
    writer.close()
    server.close()


async def test_a_peer_that_says_nothing_is_dropped_at_the_hello_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_lane, "_HELLO_S", 0.05)
    server = LaneServer(Body())
    address = await server.open("n")
    reader, writer = await asyncio.open_unix_connection(address.name)  # type: ignore[arg-type]
    assert await asyncio.wait_for(reader.read(), GUARD_S) == b""
    assert server.connections == 0
    writer.close()
    server.close()


_OTHER_USER = """
import os, socket, struct, sys
os.setgroups([]); os.setgid(65534); os.setuid(65534)
name, secret = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.connect(name)
got = b""
try:  # refused: closed at once
    sock.sendall(struct.pack("!IBI", len(secret), 1, 0) + secret)
    sock.sendall(struct.pack("!IBI", 3, 2, 1) + b"run")
    while chunk := sock.recv(65536):
        got += chunk
except ConnectionError:  # reset, or a broken pipe
    pass
print(len(got))
"""


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to become another user")
async def test_a_peer_of_another_user_is_refused_even_with_the_secret() -> None:
    body = Body()
    server = LaneServer(body)
    address = await server.open("n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _OTHER_USER,
        address.name.hex(),
        address.secret.hex(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), GUARD_S)
    assert (proc.returncode, out.strip()) == (0, b"0"), err  # closed before a byte was answered
    assert body.payloads == []
    assert server.connections == 0
    server.close()


def test_the_lane_name_is_not_a_path() -> None:
    server = LaneServer(Body())
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(OSError):  # nobody listens before open()
        sock.connect(server._name)
    sock.close()


async def test_a_hello_longer_than_the_secret_ends_the_connection_before_its_payload() -> None:
    server = LaneServer(Body())
    address = await server.open("n")
    reader, writer = await asyncio.open_unix_connection(address.name)  # type: ignore[arg-type]
    writer.write(struct.pack("!IBI", 1 << 29, HELLO, 0))  # claims 512 MiB; sends none of it
    assert await asyncio.wait_for(reader.read(), GUARD_S) == b""
    assert server.connections == 0
    writer.close()
    server.close()


async def test_a_full_worker_takes_no_more_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lane, "_MAX_PEERS", 1)
    server = LaneServer(Body())
    client = await LaneClient.connect(await server.open("n"), Lost())
    assert await asyncio.wait_for(collect(client.deliver(b"a")), GUARD_S) == [
        b"a:0",
        b"a:1",
        b"a:2",
    ]
    assert server.full  # the worker's lane() now answers None: a new executor uses Ray
    client.close()
    server.close()
