"""The local lane on real actors: an executor reaches the workers on its node on a unix
socket; a worker's death on the lane is its call's ``WORKER_LOST``, as on Ray; a tool body
that finds a lane cannot drive it; ``worker_transport = "ray"`` keeps every message on Ray.
"""

from __future__ import annotations

import os
import pickle
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from tests import envs
from tests.actors._variants import variant_runtime
from tests.actors._waits import stats_when
from tests.tools import JSON_OUT, crash_tool, text_echo_tool
from toolray import AbortController, EnvironmentLostError, ToolBatchInput, ToolCall, define_tool

cloudpickle.register_pickle_by_value(envs)

pytestmark = pytest.mark.ray

_WARM_TRIES = 50
"""Batches a test runs at most until every worker's lane is open (it opens in the background
after a worker's first message; a few batches, usually)."""


def _batch(calls: list[ToolCall], scope: str) -> ToolBatchInput:
    return ToolBatchInput(calls, AbortController().signal, scope=scope, max_parallel_tool_calls=4)


def _echoes(tool: str, n: int) -> list[ToolCall]:
    return [ToolCall(f"c{i}", tool, f'{{"text": "t{i}"}}') for i in range(n)]


async def _on_lanes(ex: Any, tool: str, scope: str) -> None:
    """Run batches of four calls (both workers) until one travels on lanes only."""
    for _ in range(_WARM_TRIES):
        before = await ex.statistics()
        out = await ex.execute_batch(_batch(_echoes(tool, 4), scope))
        assert [r.result.value["text"] for r in out.results] == ["t0", "t1", "t2", "t3"]
        after = await ex.statistics()
        sent = after.messages - before.messages
        if sent and after.local_messages - before.local_messages == sent:
            return
    raise AssertionError(f"no batch of {_WARM_TRIES} went on the workers' lanes: {after}")


async def test_calls_to_the_workers_on_this_node_go_on_their_lanes(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register(text_echo_tool("ln_echo")))
    ex = rt.executor(scope_key)
    await _on_lanes(ex, "ln_echo", scope_key)
    before = await ex.statistics()
    for i in range(5):  # lone calls, the latency path
        call = ToolCall("c", "ln_echo", f'{{"text": "{i}"}}')
        out = await ex.execute_batch(_batch([call], scope_key))
        assert out.results[0].result.value["text"] == str(i)
    after = await ex.statistics()
    assert after.messages - before.messages == 5
    assert after.local_messages - before.local_messages == 5


async def test_a_worker_that_dies_on_its_lane_fails_only_its_call_and_is_replaced(
    shared_rt: Any, scope_key: str
) -> None:
    rt = shared_rt  # bodies run in the worker itself: the crash takes the worker
    rt.owned.append(rt.registry.register(crash_tool("ln_crash")))
    rt.owned.append(rt.registry.register(text_echo_tool("ln_after")))
    ex = rt.executor(scope_key)
    await _on_lanes(ex, "ln_after", scope_key)
    before, stats = rt.stats(), await ex.statistics()
    out = await ex.execute_batch(_batch([ToolCall("c1", "ln_crash", "{}")], scope_key))
    after = await ex.statistics()
    assert after.local_messages - stats.local_messages == 1  # it went on the lane
    lost = out.results[0].result
    assert lost.error.info.code == "WORKER_LOST"
    assert "not re-run" in lost.error.message
    replaced = await stats_when(rt, lambda s: s.replacements > before.replacements)
    assert replaced.workers == before.workers
    again = await ex.execute_batch(_batch(_echoes("ln_after", 4), scope_key))
    assert [r.result.value["text"] for r in again.results] == ["t0", "t1", "t2", "t3"]


def _count(state: Any) -> int:
    return int(state["n"])


async def test_an_environments_verbs_go_on_the_lane_and_a_killed_instance_is_lost(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register_environment(envs.counter_env(fork="process")))
    for definition in envs.COUNTER_TOOLS:
        rt.owned.append(rt.registry.register(definition))
    ex = rt.executor(scope_key)
    h = ex.environment("counter")
    status = await h.open({"start": 5})  # its worker's lane opens in the background
    for _ in range(_WARM_TRIES):
        before = await ex.statistics()
        assert await h.run(_count) == 5
        after = await ex.statistics()
        if after.local_messages - before.local_messages == 1:
            break
    else:
        raise AssertionError(f"no verb of {_WARM_TRIES} went on the worker's lane: {after}")
    before = await ex.statistics()
    assert await h.run(_count) == 5
    assert (await h.snapshot())["n"] == 5
    await h.fork(f"{scope_key}-copy")  # a process fork, on the instance's worker
    after = await ex.statistics()
    assert after.messages - before.messages == 3  # one message to the worker each
    assert after.local_messages - before.local_messages == 3
    copy = rt.executor(f"{scope_key}-copy").environment("counter")
    assert await copy.run(_count) == 5
    os.kill(status.pid, signal.SIGKILL)  # the instance's process: a loss, on the lane too
    with pytest.raises(EnvironmentLostError, match=r"killed by SIGKILL|\(it was lost\)"):
        await h.run(_count)
    assert (await h.status()).state == "lost"
    assert await copy.run(_count) == 5  # the copy is a process of its own
    await copy.close()
    await h.open({"start": 1})
    assert await h.run(_count) == 1
    await h.close()


class _Canary:
    """Unpickling this writes the canary: a worker that ever read the forged message would."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> Any:
        return (Path.touch, (Path(self.path),))


def lane_probe_tool(name: str, canary: str) -> Any:
    """A body that finds every toolray lane on its node (``/proc/net/unix``), connects to
    each and sends a guessed secret and a forged message (unpickling it writes ``canary``);
    returns how many lanes it found and how many bytes they answered."""
    payload = pickle.dumps([_Canary(canary)])

    def body(args: Any, ctx: Any) -> Any:
        import socket
        import struct

        table = Path("/proc/net/unix").read_text().splitlines()[1:]
        names = {line.split()[-1] for line in table if "@toolray-lane-" in line}
        answered = 0
        for name in names:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.connect(b"\0" + name[1:].encode())
                sock.sendall(struct.pack("!IBI", 32, 1, 0) + bytes(32))
                sock.sendall(struct.pack("!IBI", len(payload), 2, 1) + payload)
                while chunk := sock.recv(65536):
                    answered += len(chunk)
            except ConnectionError:  # refused: reset, or a broken pipe
                pass
            finally:
                sock.close()
        return {"lanes": len(names), "answered": answered}

    return define_tool(
        name=name,
        description="Tries to drive its workers' lanes",
        parameters={},
        output=JSON_OUT,
        execute=body,
        is_concurrency_safe=lambda args: True,
    )


async def test_a_tool_body_that_finds_a_lane_cannot_drive_it(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    rt.owned.append(rt.registry.register(text_echo_tool("ln_warm")))
    rt.owned.append(rt.registry.register(lane_probe_tool("ln_probe", str(canary))))
    ex = rt.executor(scope_key)
    await _on_lanes(ex, "ln_warm", scope_key)
    out = await ex.execute_batch(_batch([ToolCall("p", "ln_probe", "{}")], scope_key))
    seen = out.results[0].result.value
    assert seen["lanes"] >= 2  # the attack was real: both workers' lanes were there
    assert seen["answered"] == 0
    assert not canary.exists()
    again = await ex.execute_batch(_batch(_echoes("ln_warm", 4), scope_key))  # lanes unharmed
    assert [r.result.value["text"] for r in again.results] == ["t0", "t1", "t2", "t3"]


@pytest.fixture(scope="module")
def ray_transport(ray_runtime: Any) -> Iterator[Any]:
    """A namespace with ``worker_transport = "ray"``: every message an actor call."""
    yield from variant_runtime(ray_runtime, "raylane", worker_transport="ray")


async def test_worker_transport_ray_sends_every_message_as_an_actor_call(
    ray_transport: Any, scope_key: str
) -> None:
    rt = ray_transport
    dispose = rt.registry.register(text_echo_tool("ln_ray"))
    try:
        ex = rt.executor(scope_key)
        for _ in range(6):
            out = await ex.execute_batch(_batch(_echoes("ln_ray", 4), scope_key))
            assert [r.result.value["text"] for r in out.results] == ["t0", "t1", "t2", "t3"]
        stats = await ex.statistics()
        assert stats.messages >= 6
        assert stats.local_messages == 0
    finally:
        dispose()
