"""An environment's verbs on the local lane, without Ray: the request, the reply read as
data (never unpickled), the errors by kind, and ``ENV`` frames on a real ``LaneServer``.
"""

from __future__ import annotations

import asyncio
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from toolray import EnvironmentFailedError, EnvironmentLostError
from toolray_actors._env_wire import InstanceInfo
from toolray_actors.execution._env_lane import (
    EnvLaneError,
    answer,
    read_reply,
    request,
)
from toolray_actors.execution._lane import LaneClient, LaneError, LaneServer

GUARD_S = 30.0
"""How long a test waits for what must happen before it fails (never a synchronisation)."""


class Worker:
    """A worker's four verbs, recording what they were asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[object, ...]]] = []

    async def env_open(self, *args: object) -> InstanceInfo:
        self.asked.append(("env_open", args))
        if args[3] == {"fail": True}:
            raise EnvironmentFailedError('environment "e": open failed: no')
        return InstanceInfo(pid=4242, node="node-é")

    async def env_operate(self, iid: str, op: str, data: bytes | None = None) -> bytes | None:
        self.asked.append(("env_operate", (iid, op, data)))
        if op == "lost":
            raise EnvironmentLostError("its process was killed by signal 9")
        if op == "plain":
            raise KeyError()  # no words: its type's name stands for them
        if op == "close":
            return None
        return b"state:" + (data or b"")

    async def env_fork(self, iid: str, new_iid: str, how: str) -> InstanceInfo:
        self.asked.append(("env_fork", (iid, new_iid, how)))
        raise RuntimeError("the copy could not be forked")

    async def env_discard(self, iid: str) -> None:
        self.asked.append(("env_discard", (iid,)))

    def methods(self) -> dict[str, Any]:
        return {
            m.__name__: m
            for m in (self.env_open, self.env_operate, self.env_fork, self.env_discard)
        }


async def _ask(worker: Worker, method: str, *args: object) -> object:
    return read_reply(await answer(request(method, *args), worker.methods()))


async def test_each_verb_crosses_and_its_value_comes_back_as_it_was() -> None:
    worker = Worker()
    opened = await _ask(worker, "env_open", "i1", "k", b"blob", {"seed": [1, 2]}, None)
    assert opened == InstanceInfo(pid=4242, node="node-é")
    assert await _ask(worker, "env_operate", "i1", "snapshot", b"\x00\xff") == b"state:\x00\xff"
    assert await _ask(worker, "env_operate", "i1", "close", None) is None
    assert await _ask(worker, "env_discard", "i1") is None
    assert worker.asked[0] == ("env_open", ("i1", "k", b"blob", {"seed": [1, 2]}, None))


async def test_errors_keep_their_kind_and_their_words() -> None:
    worker = Worker()
    with pytest.raises(EnvironmentLostError, match=r"^its process was killed by signal 9$"):
        await _ask(worker, "env_operate", "i1", "lost", None)
    with pytest.raises(EnvironmentFailedError, match=r'^environment "e": open failed: no$'):
        await _ask(worker, "env_open", "i1", "k", b"", {"fail": True}, None)
    with pytest.raises(EnvLaneError, match=r"^the copy could not be forked$"):
        await _ask(worker, "env_fork", "i1", "i2", "process")
    with pytest.raises(EnvLaneError, match=r"^KeyError$"):  # str(err) is empty
        await _ask(worker, "env_operate", "i1", "plain", None)


async def test_only_the_four_verbs_may_be_asked() -> None:
    worker = Worker()
    with pytest.raises(ValueError, match="not an environment verb"):
        request("run_wire", b"x")
    forged = pickle.dumps(("methods", ()))
    with pytest.raises(EnvLaneError, match="not an environment verb of a worker: 'methods'"):
        read_reply(await answer(forged, worker.methods()))
    assert worker.asked == []


class _Canary:
    """Unpickling this touches the canary: a reader that unpickled a reply would."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (Path.touch, (Path(self.path),))


def test_a_reply_is_read_as_data_never_unpickled(tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    payload = pickle.dumps(_Canary(str(canary)))
    assert read_reply(b"B" + payload) == payload  # bytes stay bytes
    for forged in (payload, b"N" + payload, b"I", b"Q" + payload):
        with pytest.raises(EnvLaneError, match="not one"):
            read_reply(forged)
    hostile = json.dumps({"kind": "lost", "type": "X", "message": "words only"}).encode()
    with pytest.raises(EnvironmentLostError, match=r"^words only$"):
        read_reply(b"E" + hostile)
    with pytest.raises(EnvLaneError, match="not one"):
        read_reply(b"E" + json.dumps(["not", "a", "dict"]).encode())
    assert not canary.exists()


async def test_env_frames_on_a_real_lane_and_a_lane_without_them_ends_the_connection() -> None:
    worker = Worker()

    async def nothing(payload: bytes) -> Any:
        yield payload

    server = LaneServer(nothing, lambda p: answer(p, worker.methods()))
    client = await LaneClient.connect(await server.open("n"), _lost)
    asks = [client.ask(request("env_operate", f"i{i}", "snapshot", b"%d" % i)) for i in range(3)]
    got = await asyncio.wait_for(asyncio.gather(*asks), GUARD_S)
    assert [read_reply(g) for g in got] == [b"state:0", b"state:1", b"state:2"]
    assert server.messages == 3
    client.close()
    server.close()

    plain = LaneServer(nothing)  # a worker without environments: ENV breaks the protocol
    client = await LaneClient.connect(await plain.open("n"), _lost)
    with pytest.raises(LaneError, match="gone"):
        await asyncio.wait_for(client.ask(request("env_discard", "i1")), GUARD_S)
    assert client.closed
    plain.close()


async def test_a_verb_that_raises_past_the_encoding_fails_its_message_alone() -> None:
    async def nothing(payload: bytes) -> Any:
        yield payload

    async def broken(payload: bytes) -> bytes:
        raise OSError("the worker's verb broke")

    server = LaneServer(nothing, broken)
    client = await LaneClient.connect(await server.open("n"), _lost)
    with pytest.raises(LaneError, match="OSError: the worker's verb broke"):
        await asyncio.wait_for(client.ask(b"x"), GUARD_S)
    assert not client.closed
    assert await asyncio.wait_for(_collect(client.deliver(b"ok")), GUARD_S) == [b"ok"]
    client.close()
    server.close()


async def _collect(items: Any) -> list[bytes]:
    return [item async for item in items]


async def _lost() -> BaseException:
    return LaneError("the worker is gone")


async def test_a_verb_runs_to_its_end_when_its_executor_goes() -> None:
    """As an actor call does: an open cut short would leave its record wrong."""
    started, release, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def nothing(payload: bytes) -> Any:
        yield payload

    async def slow(payload: bytes) -> bytes:
        started.set()
        await release.wait()
        ended.set()
        return b"N"

    server = LaneServer(nothing, slow)
    client = await LaneClient.connect(await server.open("n"), _lost)
    asking = asyncio.ensure_future(client.ask(b"x"))
    await asyncio.wait_for(started.wait(), GUARD_S)
    client.close()  # the executor goes
    with pytest.raises(LaneError):
        await asyncio.wait_for(asking, GUARD_S)
    release.set()
    await asyncio.wait_for(ended.wait(), GUARD_S)  # never cancelled
    server.close()
