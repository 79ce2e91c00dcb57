"""A worker's environment instances without Ray: real instance processes, real faults.

``ProcessInstances`` forks each instance's process from the worker's template; its calls and
operations cross as frames (a large snapshot in parts). A crash ends the instance (a
tombstone answers every later use); a kill by the ladder ends it too; a ``"process"`` fork
copies the live process; parking and closing end the process without a tombstone. Every
test leaves no process behind.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import cloudpickle
import psutil
import pytest

from tests import envs
from toolray import EnvironmentLostError
from toolray.isolation import EnvDone, EnvOp, NestedAnswer, NestedRequest, Parts, in_parts
from toolray.procs import ProtocolError
from toolray_actors.execution._call_code import TemplateCode
from toolray_actors.execution._env_host import ProcessInstances

cloudpickle.register_pickle_by_value(envs)

BLOB = cloudpickle.dumps(envs.counter_env())
INCR = cloudpickle.dumps(envs.incr)
CRASH = cloudpickle.dumps(envs.crash)


async def _nested(ident: Any, request: NestedRequest) -> NestedAnswer:
    raise RuntimeError("no nested calls here")


@pytest.fixture
def code() -> Iterator[TemplateCode]:
    held = TemplateCode()
    yield held
    held.stop()


@pytest.fixture
def host(code: TemplateCode) -> Iterator[ProcessInstances]:
    instances = ProcessInstances(code, memory_mb=512, nested=_nested)
    yield instances
    instances.close()


def _ident(token: str, name: str = "incr") -> dict[str, Any]:
    return {"call_id": token, "name": name, "token": token}


async def _incr(host: ProcessInstances, iid: str, token: str, by: int = 1) -> Any:
    return await host.run(iid, token, "def:incr", INCR, {"by": by}, _ident(token))


def test_parts_join_what_in_parts_cut() -> None:
    big = bytes(range(256)) * (40 * 1024 * 1024 // 256)  # 40 MiB: five parts
    parts = in_parts(EnvDone(op="snapshot", ok=True, data=big))
    assert len(parts) == 5
    assert all(p.more for p in parts[:-1])
    assert not parts[-1].more
    joiner = Parts()
    joined = [joiner.join(p) for p in parts]
    assert joined[:-1] == [None] * 4
    assert joined[-1] == EnvDone(op="snapshot", ok=True, data=big)
    small = EnvOp(op="run", data=b"x")
    assert in_parts(small) == [small]
    assert Parts().join(small) is small
    # an instance that sends parts without end is cut off at the bound, not kept joining
    first = sum(len(p.data or b"") for p in parts[:-1])
    bounded = Parts(limit=first)
    for p in parts[:-1]:
        assert bounded.join(p) is None
    with pytest.raises(ProtocolError, match=f"over {first} bytes"):
        bounded.join(EnvDone(op="snapshot", ok=True, data=b"!", more=True))


def test_calls_snapshot_run_and_a_large_state(host: ProcessInstances) -> None:
    async def main() -> None:
        pid = await host.open("i1", "env:c", BLOB, {"start": 5}, None)
        assert host.pids() == (pid,)
        outcomes = [await _incr(host, "i1", f"t{i}", 2) for i in range(3)]
        assert [o.value for o in outcomes] == [7, 9, 11]
        state = cloudpickle.loads(await host.operate("i1", "snapshot"))
        assert (state["n"], state["log"], state["pid"]) == (11, [2, 2, 2], pid)
        grow = cloudpickle.dumps(
            (lambda s, n: s.update(big=b"z" * n) or len(s["big"]), (30 << 20,))
        )
        assert cloudpickle.loads(await host.operate("i1", "run", grow)) == 30 << 20
        again = cloudpickle.loads(await host.operate("i1", "snapshot"))  # 30 MB: in parts
        assert len(again["big"]) == 30 << 20
        parked = await host.operate("i1", "park")
        assert parked is not None
        await asyncio.sleep(0)
        assert len(host) == 0
        await host.open("i2", "env:c", BLOB, None, parked)  # restored from the parked bytes
        assert (await _incr(host, "i2", "t9")).value == 12

    asyncio.run(main())


def _gone(pid: int) -> bool:
    """Whether ``pid`` ended (a zombie not yet reaped counts; so does one reaped meanwhile)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def test_a_crash_loses_the_instance_for_good(host: ProcessInstances) -> None:
    async def main() -> None:
        pid = await host.open("i1", "env:c", BLOB, None, None)
        crashed = await host.run("i1", "t1", "def:crash", CRASH, {}, _ident("t1", "crash"))
        assert crashed.status == "lost"
        assert crashed.detail == "its process exited with status 3"
        assert _gone(pid)
        later = await _incr(host, "i1", "t2")
        assert (later.status, later.detail) == ("lost", "its process exited with status 3")
        with pytest.raises(EnvironmentLostError, match="exited with status 3"):
            await host.operate("i1", "snapshot")

    asyncio.run(main())


def test_a_process_fork_copies_the_live_state(host: ProcessInstances) -> None:
    async def main() -> None:
        parent = await host.open("i1", "env:c", BLOB, {"start": 1}, None)
        await _incr(host, "i1", "t1")
        child = await host.fork("i1", "i2", "process")
        assert child not in (parent, 0)
        assert set(host.pids()) == {parent, child}
        assert (await _incr(host, "i2", "t2", 100)).value == 102
        assert (await _incr(host, "i1", "t3")).value == 3
        await host.operate("i1", "close")
        assert (await _incr(host, "i2", "t4")).value == 103  # the copy outlives its original
        await host.discard("i2")

    asyncio.run(main())
    assert host.pids() == ()


def test_create_raising_leaves_no_process(host: ProcessInstances) -> None:
    broken = cloudpickle.dumps(envs.failing_env())

    async def main() -> None:
        with pytest.raises(RuntimeError, match="no such task: 3"):
            await host.open("i1", "env:b", broken, 3, None)

    asyncio.run(main())
    assert host.pids() == ()


def test_an_instance_opens_after_the_template_let_its_definition_go(
    host: ProcessInstances, code: TemplateCode
) -> None:
    """The template keeps its latest 256 loads: a definition it let go is loaded again.

    The soak found it (issue 42, item 2): after hundreds of scopes' own tools had arrived,
    an environment's open failed "definition did not arrive" — the worker still counted it
    among the template's loads, so a fresh instance process was sent none.
    """

    async def main() -> None:
        for r in range(5):  # each open refreshes the definition here, not in the template
            await host.open(f"i{r}", "env:c", BLOB, {"start": r}, None)
            assert (await _incr(host, f"i{r}", f"t{r}")).value == r + 1
            await host.operate(f"i{r}", "close")
            for i in range(150):  # other definitions (scopes' own tools) reach the template
                code.learn(f"def:other-{r}-{i}", INCR)

    asyncio.run(main())
