"""Environments on Ray: instances in processes of their own (``"call"``), real kills, forks.

Every test registers the ``counter`` and ``fs`` environments of ``tests.envs`` and their
tools on the session namespace (``isolation="call"``), uses scopes of its own, and lifts
it all afterwards. Faults are real: a body's ``os._exit`` ends its instance's process; a
body deaf to its deadline gets the cancellation ladder, whose kill takes the instance.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import psutil
import pytest

from tests import envs
from tests.tools import text_echo_tool
from toolray import (
    EnvironmentFailedError,
    EnvironmentLostError,
    TimeoutPolicy,
    ToolBatchInput,
    ToolCall,
)
from toolray.errors import UnknownEnvironmentError

cloudpickle.register_pickle_by_value(envs)

pytestmark = pytest.mark.ray

WAIT_S = 60.0


@pytest.fixture
def env_rt(rt: Any) -> Iterator[Any]:
    """The session runtime with the counter and fs environments and their tools."""
    rt.owned.append(rt.registry.register_environment(envs.counter_env()))
    rt.owned.append(rt.registry.register_environment(envs.fs_env()))
    for definition in (*envs.COUNTER_TOOLS, *envs.FS_TOOLS):
        rt.owned.append(rt.registry.register(definition))
    rt.owned.append(rt.registry.register(text_echo_tool("env_echo")))
    rt.owned.append(TimeoutPolicy().install(rt.registry))
    return rt


def run(rt: Any, scope: str, *calls: tuple[str, Any]) -> list[Any]:
    """One batch in ``scope``: each call's value, or its failure's code."""
    batch = ToolBatchInput(
        [ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)], scope=scope
    )
    out = rt.executor(scope).execute_batch_sync(batch)
    return [
        (r.result.error.info.code if r.result.error.info else r.result.error.message)
        if r.result.is_error
        else r.result.value
        for r in out.results
    ]


def wait_for(condition: Any, what: str) -> None:
    """Wait (bounded) until ``condition()`` holds."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} never happened")
        time.sleep(0.02)


def test_config_calls_snapshot_and_where_the_instance_lives(env_rt: Any, scope_key: str) -> None:
    fs = env_rt.executor(scope_key).environment("fs")
    status = fs.open_sync({"files": {"README": "hello"}})
    assert (status.state, status.scope) == ("open", scope_key)
    assert status.pid is not None
    assert status.pid != os.getpid()
    out = run(
        env_rt,
        scope_key,
        ("fs_write", {"path": "a.txt", "text": "A"}),
        ("fs_ls", {}),
        ("fs_read", {"path": "README"}),
    )
    assert out == [2, ["README", "a.txt"], "hello"]
    assert fs.snapshot_sync()["files"] == {"README": "hello", "a.txt": "A"}
    assert fs.run_sync(lambda state, suffix: sorted(state["files"])[0] + suffix, "!") == "README!"
    counter = env_rt.registry.environment("counter", scope=scope_key)
    counter.open_sync({"start": 3})
    where = run(env_rt, scope_key, ("where", {}))[0]
    assert where["body"] == where["state"] == counter.status_sync().pid  # calls run there
    assert fs.status_sync().calls == 3


def test_two_scopes_apart_and_concurrent_batches_lose_no_update(
    env_rt: Any, scope_key: str
) -> None:
    other = f"{scope_key}-other"
    env_rt.executor(scope_key).environment("counter").open_sync({"start": 100})

    async def batches() -> None:
        calls = [ToolCall(f"c{i}", "incr", {"by": 1}) for i in range(10)]
        handle = env_rt.executor(scope_key)
        await asyncio.gather(
            *(handle.execute_batch(ToolBatchInput(calls, scope=scope_key)) for _ in range(4))
        )

    asyncio.run(batches())
    assert run(env_rt, other, ("incr", {"by": 1})) == [1]
    state = env_rt.executor(scope_key).environment("counter").snapshot_sync()
    assert state["n"] == 140
    assert len(state["log"]) == 40


@pytest.mark.parametrize("how", ["snapshot", "process", "callable"])
def test_fork_then_diverge(rt: Any, scope_key: str, how: str) -> None:
    fork: Any = envs.copy_counter if how == "callable" else how
    rt.owned.append(rt.registry.register_environment(envs.counter_env(fork=fork)))
    for definition in envs.COUNTER_TOOLS:
        rt.owned.append(rt.registry.register(definition))
    parent = rt.executor(scope_key).environment("counter")
    parent.open_sync({"start": 10})
    run(rt, scope_key, ("incr", {"by": 1}))
    branch = f"{scope_key}-branch"
    child = parent.fork_sync(branch)
    assert child.scope == branch
    status = child.status_sync()
    assert status.state == "open"
    assert status.pid != parent.status_sync().pid
    assert run(rt, branch, ("incr", {"by": 100})) == [111]
    assert run(rt, scope_key, ("incr", {"by": 1})) == [12]
    assert child.snapshot_sync()["log"] == [1, 100]
    assert parent.snapshot_sync()["log"] == [1, 1]
    where = run(rt, branch, ("where", {}))[0]
    assert where["body"] == status.pid


@pytest.mark.parametrize("how", ["snapshot", "process"])
def test_a_fork_between_two_scopes_of_one_shard_is_one_request_and_diverges(
    sharded_runtime: Any, scope_key: str, how: str
) -> None:
    """A shard serving both scopes makes and adopts the copy itself (no second request, no
    object store); the branch diverges, and a second fork replaces (closes) the first."""
    rt = sharded_runtime
    owned = [rt.registry.register_environment(envs.counter_env(fork=how))]
    owned += [rt.registry.register(definition) for definition in envs.COUNTER_TOOLS]
    by_actor: dict[str, list[str]] = {}
    for i in range(16):
        by_actor.setdefault(rt.executor(f"{scope_key}-{i}").name, []).append(f"{scope_key}-{i}")
    source, target = next(scopes for scopes in by_actor.values() if len(scopes) > 1)[:2]
    parent = rt.executor(source).environment("counter")
    child = rt.executor(target).environment("counter")
    try:
        parent.open_sync({"start": 10})
        assert run(rt, source, ("incr", {"by": 1})) == [11]
        assert parent.fork_sync(target).scope == target
        assert child.status_sync().pid != parent.status_sync().pid
        assert run(rt, target, ("incr", {"by": 100})) == [111]
        assert run(rt, source, ("incr", {"by": 1})) == [12]
        assert child.snapshot_sync()["log"] == [1, 100]
        parent.fork_sync(target)  # the branch's previous instance is closed and replaced
        assert child.snapshot_sync()["log"] == [1, 1]
        assert run(rt, target, ("incr", {"by": 1000})) == [1012]
        assert parent.snapshot_sync()["log"] == [1, 1]
    finally:
        child.close_sync()
        parent.close_sync()
        for dispose in reversed(owned):
            dispose()


def test_a_crash_loses_its_instance_only_and_open_recovers(env_rt: Any, scope_key: str) -> None:
    other = f"{scope_key}-other"
    h = env_rt.executor(scope_key).environment("counter")
    h.open_sync({"start": 5})
    env_rt.executor(other).environment("counter").open_sync({"start": 50})
    pid = h.status_sync().pid
    out = run(env_rt, scope_key, ("crash", {}), ("env_echo", {"text": "still here"}))
    assert out[0] == "ENVIRONMENT_LOST"
    assert out[1]["text"] == "still here"  # a stateless call of the same batch
    with contextlib.suppress(psutil.NoSuchProcess):  # gone, or a zombie not reaped yet
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert run(env_rt, scope_key, ("incr", {"by": 1}), ("peek", {})) == ["ENVIRONMENT_LOST"] * 2
    assert h.status_sync().state == "lost"
    with pytest.raises(EnvironmentLostError, match="exited with status 3"):
        h.snapshot_sync()
    with pytest.raises(EnvironmentLostError, match="stays lost until it is opened again"):
        h.run_sync(lambda state: state)
    assert run(env_rt, other, ("incr", {"by": 1})) == [51]  # another scope is untouched
    h.open_sync({"start": 1})
    assert run(env_rt, scope_key, ("incr", {"by": 1})) == [2]


def test_a_body_deaf_to_its_deadline_ends_timed_out_and_loses_its_instance(
    env_rt: Any, scope_key: str
) -> None:
    other = f"{scope_key}-other"
    env_rt.executor(other).environment("counter").open_sync({"start": 7})
    out = run(env_rt, scope_key, ("incr", {"by": 1}), ("hang", {}), ("peek", {}))
    assert out == [1, "TOOL_TIMEOUT", "ENVIRONMENT_LOST"]
    assert env_rt.executor(scope_key).environment("counter").status_sync().state == "lost"
    assert run(env_rt, other, ("peek", {})) == [7]


def test_create_raising_and_an_unknown_environment(rt: Any, scope_key: str) -> None:
    rt.owned.append(rt.registry.register_environment(envs.failing_env()))
    rt.owned.append(rt.registry.register(envs.use_broken))
    rt.owned.append(rt.registry.register(envs.use_nowhere))
    h = rt.executor(scope_key).environment("broken")
    with pytest.raises(EnvironmentFailedError, match="create failed: no such task"):
        h.open_sync({"id": 7})
    assert h.status_sync().state == "closed"
    assert run(rt, scope_key, ("use_broken", {}), ("use_nowhere", {})) == [
        "ENVIRONMENT_FAILED",
        "UNKNOWN_ENVIRONMENT",
    ]
    with pytest.raises(UnknownEnvironmentError):
        rt.executor(scope_key).environment("nowhere").open_sync()
    # nothing that failed to open stays recorded (its executor's successor would say "lost")
    from toolray_actors.control._store import Store

    held = Store(rt.config.namespace).instances
    wait_for(lambda: held(f"toolray:executor:{scope_key}") == [], "the failed open's record to go")


def test_an_idle_instance_parks_into_the_object_store_and_comes_back(
    rt: Any, scope_key: str
) -> None:
    rt.owned.append(rt.registry.register_environment(envs.counter_env(park_after_s=0.3)))
    for definition in envs.COUNTER_TOOLS:
        rt.owned.append(rt.registry.register(definition))
    h = rt.executor(scope_key).environment("counter")
    h.open_sync({"start": 41})
    pid = h.status_sync().pid
    wait_for(lambda: h.status_sync().state == "parked", "parking")
    parked = h.status_sync()
    assert parked.pid is None
    assert parked.bytes
    wait_for(lambda: not psutil.pid_exists(pid), "the parked instance's process ending")
    assert run(rt, scope_key, ("incr", {"by": 1})) == [42]
    back = h.status_sync()
    assert back.state in ("open", "parked")
    assert rt.stats().environments.restores >= 1


def test_close_runs_at_scope_dispose_and_nothing_is_left_running(
    env_rt: Any, scope_key: str, tmp_path: Path
) -> None:
    marker = tmp_path / "closed.txt"
    scope = env_rt.registry.scope(scope_key)
    h = env_rt.executor(scope_key).environment("counter")
    h.open_sync({"start": 9})
    h.run_sync(envs.mark_close, str(marker))
    pid = h.status_sync().pid
    scope.dispose()
    assert marker.read_text(encoding="utf-8").strip() == "9"
    wait_for(lambda: not psutil.pid_exists(pid), "the closed instance's process ending")


def test_nested_calls_into_the_same_instance_run_inside_the_callers_turn(
    env_rt: Any, scope_key: str
) -> None:
    assert run(env_rt, scope_key, ("incr_twice", {"by": 2}), ("incr", {"by": 1})) == [[2, 4], 5]


def test_stats_count_instances_by_state(env_rt: Any, scope_key: str) -> None:
    before = env_rt.stats().environments
    for i in range(3):
        env_rt.executor(f"{scope_key}-{i}").environment("counter").open_sync()
    run(env_rt, f"{scope_key}-0", ("crash", {}))
    held = {
        env_rt.executor(f"{scope_key}-{i}").environment("counter").status_sync().pid for i in (1, 2)
    }

    def counted() -> bool:
        # a snapshot leaves out an actor too busy to answer in time (a loaded machine): the
        # next one is asked again; earlier tests' idle instances may park meanwhile (open and
        # parked together stay put)
        after = env_rt.stats()
        pids = {p for pool in after.pools for p in pool.instance_pids}
        return (
            held_now(after.environments) - held_now(before) == 2
            and after.environments.lost - before.lost == 1
            and after.environments.opens - before.opens == 3
            and held <= pids
        )

    wait_for(counted, "two open, one lost, three opened, the two processes listed")
    for i in range(3):
        env_rt.executor(f"{scope_key}-{i}").environment("counter").close_sync()
    assert held_now(env_rt.stats().environments) == held_now(before)


def held_now(counts: Any) -> int:
    """Instances held open or parked (parking moves one from the first to the second)."""
    return int(counts.open + counts.parked)


def test_shared_isolation_keeps_states_in_the_worker(shared_rt: Any, scope_key: str) -> None:
    shared_rt.owned.append(shared_rt.registry.register_environment(envs.counter_env()))
    for definition in envs.COUNTER_TOOLS:
        shared_rt.owned.append(shared_rt.registry.register(definition))
    h = shared_rt.executor(scope_key).environment("counter")
    status = h.open_sync({"start": 1})
    assert run(shared_rt, scope_key, ("incr", {"by": 1}), ("incr_twice", {"by": 1})) == [2, [3, 4]]
    where = run(shared_rt, scope_key, ("where", {}))[0]
    assert where["body"] == where["state"] == status.pid  # the worker itself
    child = h.fork_sync(f"{scope_key}-b")
    assert run(shared_rt, f"{scope_key}-b", ("incr", {"by": 10})) == [14]
    assert h.snapshot_sync()["n"] == 4
    same_worker = child.status_sync().pid == status.pid
    # the documented blast radius: a crash takes the worker, and every instance it held
    assert run(shared_rt, scope_key, ("crash", {})) == ["ENVIRONMENT_LOST"]
    peek = run(shared_rt, f"{scope_key}-b", ("peek", {}))
    assert peek == (["ENVIRONMENT_LOST"] if same_worker else [14])
    assert child.status_sync().state == ("lost" if same_worker else "open")
    h.open_sync({"start": 100})
    assert run(shared_rt, scope_key, ("incr", {"by": 1})) == [101]


def test_an_executor_killed_with_an_instance_loses_it_loudly(env_rt: Any, scope_key: str) -> None:
    h = env_rt.executor(scope_key).environment("counter")
    held = h.open_sync({"start": 3}).pid
    assert run(env_rt, scope_key, ("incr", {"by": 1})) == [4]
    name = f"toolray:executor:{scope_key}"
    pid = next(a.pid for a in env_rt.stats().actors if a.name == name)
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not psutil.pid_exists(pid), "the executor's death")
    # its successor knows the instance was held: never a silent re-create with config=None
    assert run(env_rt, scope_key, ("incr", {"by": 1})) == ["ENVIRONMENT_LOST"]
    assert h.status_sync().state == "lost"
    # and the process it held on the shared pool's worker does not outlive it
    wait_for(lambda: not psutil.pid_exists(held), "the orphaned instance's end")
    h.open_sync({"start": 10})
    assert run(env_rt, scope_key, ("incr", {"by": 1})) == [11]


def test_an_instance_is_recorded_before_its_first_result_leaves(
    env_rt: Any, scope_key: str
) -> None:
    """An executor killed right after a call that opened (or a fork that made) an instance
    must come back knowing of it: the record is written before the result can leave."""
    from toolray_actors.control._store import Store

    store = Store(env_rt.config.namespace)

    def recorded(scope: str) -> set[tuple[str | None, str]]:
        held = store.instances(f"toolray:executor:{scope}")
        return {(s, n) for s, n, where in held if where}

    assert run(env_rt, scope_key, ("incr", {"by": 1})) == [1]  # opened with config=None
    assert recorded(scope_key) == {(scope_key, "counter")}
    branch = f"{scope_key}-rec"
    env_rt.executor(scope_key).environment("counter").fork_sync(branch)
    assert recorded(branch) == {(branch, "counter")}
    env_rt.executor(branch).environment("counter").close_sync()
    wait_for(lambda: not recorded(branch), "the closed branch's record to go")


def test_the_namespace_ending_closes_its_instances(ray_runtime: Any, tmp_path: Path) -> None:
    from toolray_actors import RayRuntime, RuntimeConfig

    base = ray_runtime.config.model_dump()
    config = RuntimeConfig.model_validate({**base, "namespace": f"{base['namespace']}-env-end"})
    marker = tmp_path / "closed.txt"
    rt = RayRuntime.start(config)
    try:
        rt.registry.register_environment(envs.counter_env())
        rt.registry.register(envs.incr)
        h = rt.executor("ending").environment("counter")
        h.open_sync({"start": 5})
        assert run(rt, "ending", ("incr", {"by": 1})) == [6]
        h.run_sync(envs.mark_close, str(marker))
        pid = h.status_sync().pid
    finally:
        rt.shutdown()  # the namespace's last lease: it ends, and its instances close
    assert marker.read_text(encoding="utf-8").strip() == "6"
    wait_for(lambda: not psutil.pid_exists(pid), "the instance's process ending")


def test_an_exiting_idle_executor_refuses_an_open_and_its_successor_serves_it(
    env_rt: Any, scope_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reaper retires an idle executor (it holds no instance), then kills it: a request
    arriving in between is asked again of the next executor, never ``ENVIRONMENT_LOST``."""
    import ray

    ex = env_rt.executor(scope_key)
    assert len(run(env_rt, scope_key, ("env_echo", {"text": "a"}))) == 1
    name = f"toolray:executor:{scope_key}"
    pid = next(a.pid for a in env_rt.stats().actors if a.name == name)
    actor = ray.get_actor(name, namespace=env_rt.config.namespace)
    ray.get(actor.retire.remote())  # the reaper's first step: nothing starts here any more
    refused, lost = threading.Event(), ex._lost
    monkeypatch.setattr(ex, "_lost", lambda: (refused.set(), lost()))
    opened: list[Any] = []
    h = ex.environment("counter")
    opening = threading.Thread(target=lambda: opened.append(h.open_sync({"start": 7})))
    opening.start()
    assert refused.wait(WAIT_S), "the exiting executor never refused the open"
    ray.kill(actor)  # the reaper's last step
    opening.join(WAIT_S)
    assert [s.state for s in opened] == ["open"]
    assert run(env_rt, scope_key, ("incr", {"by": 1})) == [8]
    assert next(a.pid for a in env_rt.stats().actors if a.name == name) != pid
