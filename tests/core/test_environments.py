"""Environments in-process: definitions, instances, turns, fork, park, close, lost."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests import envs
from toolray import (
    AbortController,
    EnvironmentFailedError,
    EnvironmentLostError,
    Placement,
    ToolBatchInput,
    ToolCall,
    ToolRegistry,
    ToolRunContext,
    define_environment,
    define_tool,
    thaw_json,
    tool,
)
from toolray.errors import UnknownEnvironmentError
from toolray.testing import FakeClock, Gate


def _registry(*definitions: Any, clock: Any = None, env: Any = None) -> ToolRegistry:
    reg = ToolRegistry(clock=clock) if clock is not None else ToolRegistry()
    reg.register_environment(env if env is not None else envs.counter_env())
    reg.register_environment(envs.fs_env())
    for definition in (*envs.COUNTER_TOOLS, *envs.FS_TOOLS, *definitions):
        reg.register(definition)
    return reg


def _run(reg: ToolRegistry, scope: str, *calls: tuple[str, Any]) -> list[Any]:
    batch = ToolBatchInput(
        [ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)], scope=scope
    )
    out = reg.execute_batch_sync(batch)
    return [
        r.result.error.info.code
        if r.result.is_error and r.result.error.info
        else (r.result.error.message if r.result.is_error else r.result.value)
        for r in out.results
    ]


async def _until(condition: Any) -> None:
    """Yield to the loop until ``condition()`` holds (the tasks it waits for run meanwhile)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


# ------------------------------------------------------------------ definitions
def test_define_environment_checks_every_field() -> None:
    with pytest.raises(ValueError, match="non-empty str"):
        define_environment("", create=dict)
    with pytest.raises(TypeError, match="create must be callable"):
        define_environment("x", create=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="close must be callable"):
        define_environment("x", create=dict, close=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match='fork must be "snapshot", "process"'):
        define_environment("x", create=dict, fork="copy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="park_after_s must be a positive number"):
        define_environment("x", create=dict, park_after_s=0)
    with pytest.raises(TypeError, match="placement must be a Placement"):
        define_environment("x", create=dict, placement={"size": 2})  # type: ignore[arg-type]
    env = define_environment("x", create=dict, park_after_s=5)
    assert (env.fork, env.park_after_s, env.placement, env.snapshot) == (
        "snapshot",
        5.0,
        None,
        None,
    )
    assert define_environment("y", create=dict).park_after_s == 60.0
    assert define_environment("z", create=dict, park_after_s=None).park_after_s is None


def test_a_tool_of_an_environment_takes_no_placement_of_its_own() -> None:
    with pytest.raises(ValueError, match='a tool of environment "counter" runs where its instance'):

        @tool(environment="counter", placement=Placement(size=2))
        def placed(*, ctx: ToolRunContext) -> int:
            return 1

    with pytest.raises(TypeError, match="environment must be an environment's name"):
        define_tool(
            name="t",
            description=None,
            parameters={},
            output=envs.incr.output,
            execute=lambda a, c: 1,
            environment=3,  # type: ignore[arg-type]
        )
    assert envs.incr.environment == "counter"
    assert envs.incr.placement is None


def test_register_environment_refuses_duplicates_and_other_types(reg: ToolRegistry) -> None:
    reg.register_environment(envs.counter_env())
    with pytest.raises(ValueError, match='environment "counter" is already registered'):
        reg.register_environment(envs.counter_env())
    with pytest.raises(
        TypeError, match="register_environment\\(\\) takes an EnvironmentDefinition"
    ):
        reg.register_environment(envs.incr)  # type: ignore[arg-type]
    scoped = reg.scope("a").register_environment(envs.counter_env(create=lambda c: {"n": 7}))
    assert reg.environment_definition("counter", "a") is not reg.environment_definition("counter")
    scoped()
    assert reg.environment_definition("counter", "a") is reg.environment_definition("counter")
    assert reg.environment_names("a") == ["counter"]


# ------------------------------------------------------------------ calls
def test_config_then_calls_then_snapshot() -> None:
    reg = _registry()
    fs = reg.environment("fs", scope="task-1")
    status = fs.open_sync({"files": {"README": "hello"}})
    assert (status.state, status.scope, status.calls) == ("open", "task-1", 0)
    out = _run(
        reg,
        "task-1",
        ("fs_write", {"path": "a.txt", "text": "A"}),
        ("fs_ls", {}),
        ("fs_read", {"path": "README"}),
        ("fs_read", {"path": "nope"}),
    )
    assert out[:3] == [2, ["README", "a.txt"], "hello"]
    assert "nope" in out[3]
    snap = fs.snapshot_sync()
    assert snap["files"] == {"README": "hello", "a.txt": "A"}
    snap["files"]["b"] = "changed in the copy"
    assert "b" not in fs.snapshot_sync()["files"]  # a copy, not the live state
    assert fs.status_sync().calls == 4


def test_two_scopes_have_their_own_instances() -> None:
    reg = _registry()
    reg.environment("counter", scope="a").open_sync({"start": 100})
    assert _run(reg, "a", ("incr", {"by": 1})) == [101]
    assert _run(reg, "b", ("incr", {"by": 1})) == [1]  # opened with config=None on first use
    assert reg.environment("counter", scope="a").run_sync(lambda s: s["n"]) == 101
    assert reg.environment("counter", scope="b").status_sync().calls == 1


def test_concurrent_batches_of_increments_lose_no_update() -> None:
    reg = _registry()
    reg.environment("counter", scope="a").open_sync()

    def batch() -> None:
        _run(reg, "a", *[("incr", {"by": 1})] * 25)

    threads = [threading.Thread(target=batch) for _ in range(4)]  # four loops at once
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    async def gathered() -> None:
        calls = [ToolCall(f"g{i}", "incr", {"by": 1}) for i in range(10)]
        await asyncio.gather(
            *(reg.execute_batch(ToolBatchInput(calls, scope="a")) for _ in range(5))
        )

    asyncio.run(gathered())
    state = reg.environment("counter", scope="a").snapshot_sync()
    assert state["n"] == 150
    assert len(state["log"]) == 150


def test_safe_calls_overlap_but_never_an_exclusive_one() -> None:
    gate, started = Gate(), []

    @tool(environment="counter", concurrency_safe=True)
    async def slow_peek(key: str, *, ctx: ToolRunContext) -> int:
        started.append(key)
        await gate.wait()
        return int(ctx.environment["n"])

    reg = _registry(slow_peek)

    async def main() -> list[Any]:
        h = reg.environment("counter", scope="a")
        await h.open()
        reads = asyncio.ensure_future(
            reg.execute_batch(
                ToolBatchInput(
                    [
                        ToolCall("r1", "slow_peek", {"key": "1"}),
                        ToolCall("r2", "slow_peek", {"key": "2"}),
                    ],
                    scope="a",
                )
            )
        )
        await _until(lambda: len(started) == 2)  # both reads hold the instance together
        write = asyncio.ensure_future(
            reg.execute_batch(ToolBatchInput([ToolCall("w", "incr", {"by": 5})], scope="a"))
        )
        for _ in range(20):
            await asyncio.sleep(0)
        assert not write.done()  # the exclusive write waits for the reads' turn to end
        gate.open()
        first, second = await reads, await write
        return [r.result.value for r in first.results] + [second.results[0].result.value]

    assert asyncio.run(main()) == [0, 0, 5]


def test_a_nested_call_into_the_same_instance_runs_inside_its_callers_turn() -> None:
    reg = _registry()
    assert _run(reg, "a", ("incr_twice", {"by": 2}), ("incr", {"by": 1})) == [[2, 4], 5]


def test_a_call_aborted_while_it_waits_for_its_turn_never_runs() -> None:
    gate = Gate()

    @tool(environment="counter")
    async def hold(*, ctx: ToolRunContext) -> int:
        await gate.wait()
        return 0

    reg = _registry(hold)

    async def main() -> Any:
        holder = asyncio.ensure_future(
            reg.execute_batch(ToolBatchInput([ToolCall("h", "hold", {})], scope="a"))
        )
        await _until(lambda: reg.environment("counter", scope="a").status_sync().state == "open")
        ctrl = AbortController()
        waiting = asyncio.ensure_future(
            reg.execute_batch(
                ToolBatchInput([ToolCall("w", "incr", {"by": 1})], ctrl.signal, scope="a")
            )
        )
        for _ in range(20):
            await asyncio.sleep(0)
        ctrl.abort("user")
        out = await waiting
        gate.open()
        await holder
        return out.results[0].result.error.info.code

    assert asyncio.run(main()) == "ABORTED_BEFORE_DISPATCH"
    assert reg.environment("counter", scope="a").run_sync(lambda s: s["n"]) == 0


# ------------------------------------------------------------------ errors
def test_unknown_environment_fails_the_call_and_the_handle() -> None:
    @tool(environment="nowhere")
    def lost_tool(*, ctx: ToolRunContext) -> int:
        return 1

    reg = _registry(lost_tool)
    assert _run(reg, "a", ("lost_tool", {}), ("incr", {"by": 1})) == ["UNKNOWN_ENVIRONMENT", 1]
    with pytest.raises(UnknownEnvironmentError, match='unknown environment "nowhere"'):
        reg.environment("nowhere", scope="a").open_sync()
    assert UnknownEnvironmentError("x").code == "UNKNOWN_ENVIRONMENT"


def test_create_raising_leaves_nothing_open() -> None:
    @tool(environment="broken")
    def use(*, ctx: ToolRunContext) -> int:
        return 1

    reg = _registry(use)
    reg.register_environment(envs.failing_env())
    h = reg.environment("broken", scope="a")
    with pytest.raises(EnvironmentFailedError, match=r"create failed: no such task: \{'id': 7\}"):
        h.open_sync({"id": 7})
    assert h.status_sync().state == "closed"
    assert _run(reg, "a", ("use", {}), ("incr", {"by": 1})) == ["ENVIRONMENT_FAILED", 1]
    assert EnvironmentFailedError("x").code == "ENVIRONMENT_FAILED"


def test_open_takes_a_json_config_only() -> None:
    reg = _registry()
    with pytest.raises(TypeError, match='environment "counter": open\\(\\) takes a JSON config'):
        reg.environment("counter", scope="a").open_sync({"start": object()})


def test_a_config_reaches_create_as_a_fresh_mutable_copy() -> None:
    seen: list[Any] = []
    env = define_environment("counter", create=lambda config: seen.append(config) or {"n": 0})
    reg = _registry(env=env)
    config = {"tags": ["a"]}
    reg.environment("counter", scope="a").open_sync(config)
    seen[0]["tags"].append("b")
    assert config == {"tags": ["a"]}
    assert type(seen[0]["tags"]) is list


# ------------------------------------------------------------------ fork
@pytest.mark.parametrize("how", ["snapshot", "process", "callable"])
def test_fork_then_diverge(how: str) -> None:
    fork: Any = (lambda s: {**s, "log": list(s["log"])}) if how == "callable" else how
    reg = _registry(env=envs.counter_env(fork=fork))
    parent = reg.environment("counter", scope="root")
    parent.open_sync({"start": 10})
    _run(reg, "root", ("incr", {"by": 1}))
    child = parent.fork_sync("branch-1")
    assert (child.scope, child.status_sync().state) == ("branch-1", "open")
    assert _run(reg, "branch-1", ("incr", {"by": 100})) == [111]
    assert _run(reg, "root", ("incr", {"by": 1})) == [12]
    assert child.snapshot_sync()["log"] == [1, 100]
    assert parent.snapshot_sync()["log"] == [1, 1]


def test_fork_refuses_its_own_scope_and_an_unforkable_environment() -> None:
    reg = _registry(env=envs.counter_env(fork=None))
    h = reg.environment("counter", scope="a")
    with pytest.raises(ValueError, match="another scope"):
        h.fork_sync("a")
    with pytest.raises(EnvironmentFailedError, match="not forkable"):
        h.fork_sync("b")
    assert reg.environment("counter", scope="b").status_sync().state == "closed"


# ------------------------------------------------------------------ park, close, lost
def test_an_idle_instance_parks_and_comes_back_on_its_next_use() -> None:
    clock = FakeClock()
    reg = _registry(env=envs.counter_env(park_after_s=30), clock=clock)
    h = reg.environment("counter", scope="a")
    h.open_sync({"start": 5})
    assert asyncio.run(reg.environments.park_idle()) == 0  # not idle long enough
    clock.advance(31)
    assert asyncio.run(reg.environments.park_idle()) == 1
    status = h.status_sync()
    assert (status.state, status.pid) == ("parked", None)
    assert status.bytes
    assert _run(reg, "a", ("incr", {"by": 1})) == [6]
    assert h.status_sync().state == "open"
    counts = reg.environments.counts()
    assert (counts.parks, counts.restores, counts.open) == (1, 1, 1)


def test_a_state_that_does_not_snapshot_is_never_parked() -> None:
    clock = FakeClock()
    reg = _registry(env=envs.unsnapshottable_env(park_after_s=1), clock=clock)
    reg.environment("counter", scope="a").open_sync()
    clock.advance(2)
    assert asyncio.run(reg.environments.park_idle()) == 0
    assert reg.environment("counter", scope="a").status_sync().state == "open"
    assert reg.environments.next_park_at() is None


def test_a_parked_state_that_cannot_come_back_is_lost_loudly_until_opened() -> None:
    clock = FakeClock()
    broken = {"restores": 0}

    def restore(data: bytes) -> Any:
        broken["restores"] += 1
        raise OSError("disk gone")

    env = envs.counter_env(park_after_s=1, restore=restore)
    reg = _registry(env=env, clock=clock)
    h = reg.environment("counter", scope="a")
    h.open_sync()
    clock.advance(2)
    asyncio.run(reg.environments.park_idle())
    assert _run(reg, "a", ("incr", {"by": 1}), ("peek", {})) == ["ENVIRONMENT_LOST"] * 2
    assert h.status_sync().state == "lost"
    with pytest.raises(EnvironmentLostError, match="stays lost until it is opened again"):
        h.run_sync(lambda s: s)
    assert broken["restores"] == 1  # never re-created (nor restored again) behind our back
    assert _run(reg, "b", ("incr", {"by": 1})) == [1]  # another scope is untouched
    h.open_sync({"start": 3})
    assert _run(reg, "a", ("incr", {"by": 1})) == [4]


def test_an_open_whose_process_died_leaves_the_instance_lost_not_closed() -> None:
    """An open cut short by a loss is no open: later calls fail until an open succeeds.

    Left ``closed``, the scope's next call would open a new instance with ``config=None``
    behind the agent's back (the chaos campaign's silent reset after a pool's kill).
    """
    from toolray.environments._backend import LocalBackend

    class DiesOnce(LocalBackend):
        dead = True

        async def create(self, ref: Any, definition: Any, config: Any) -> Any:
            if self.dead:
                self.dead = False
                raise EnvironmentLostError("the worker holding it died")
            return await super().create(ref, definition, config)

    reg = _registry()
    reg.environments.backend = DiesOnce()  # before any instance: nothing of the old one kept
    h = reg.environment("counter", scope="a")
    with pytest.raises(EnvironmentLostError, match="the worker holding it died"):
        h.open_sync({"start": 5})
    assert h.status_sync().state == "lost"
    assert _run(reg, "a", ("incr", {"by": 1})) == ["ENVIRONMENT_LOST"]  # no silent open
    h.open_sync({"start": 5})
    assert _run(reg, "a", ("incr", {"by": 1})) == [6]


def test_close_runs_once_and_is_idempotent() -> None:
    envs.closed.clear()
    reg = _registry()
    h = reg.environment("counter", scope="a")
    h.open_sync({"start": 1})
    h.close_sync()
    h.close_sync()
    assert [s["n"] for s in envs.closed] == [1]
    assert h.status_sync().state == "closed"
    assert _run(reg, "a", ("incr", {"by": 1})) == [1]  # a closed instance reopens fresh


def test_open_closes_the_previous_instance_first() -> None:
    envs.closed.clear()
    reg = _registry()
    h = reg.environment("counter", scope="a")
    h.open_sync({"start": 1})
    h.open_sync({"start": 2})
    assert [s["n"] for s in envs.closed] == [1]
    assert h.run_sync(lambda s, k: s["n"] * k, 10) == 20


def test_instances_close_with_their_scope_and_the_registry() -> None:
    envs.closed.clear()
    seen: list[str] = []

    async def aclose(state: Any) -> None:
        seen.append(f"async:{state['n']}")

    reg = _registry()
    reg.register_environment(define_environment("other", create=lambda c: {"n": 9}, close=aclose))
    scope = reg.scope("a")
    reg.environment("counter", scope="a").open_sync({"start": 4})
    reg.environment("other", scope="a").open_sync()
    reg.environment("counter", scope="b").open_sync({"start": 5})
    scope.dispose()
    assert [s["n"] for s in envs.closed] == [4]
    assert seen == ["async:9"]
    assert reg.environment("counter", scope="a").status_sync().state == "closed"
    assert asyncio.run(reg.close_environments()) == 1
    assert [s["n"] for s in envs.closed] == [4, 5]


def test_arguments_kept_in_a_state_are_thawed_copies() -> None:
    reg = _registry(envs.remember_define_tool_args())
    assert _run(reg, "a", ("remember", {"tags": ["x"]}), ("remember", {"tags": ["y"]})) == [1, 2]
    kept = reg.environment("counter", scope="a").snapshot_sync()["kept"]
    assert kept == {"tags": ["x", "seen", "seen"]}
    assert thaw_json is not None


def test_a_thousand_instances() -> None:
    reg = _registry()

    async def main() -> None:
        for i in range(1000):
            await reg.execute_batch(
                ToolBatchInput([ToolCall("c", "incr", {"by": i})], scope=f"s{i}")
            )

    asyncio.run(main())
    assert reg.environments.counts().open == 1000
    assert reg.environment("counter", scope="s999").run_sync(lambda s: s["n"]) == 999
    assert asyncio.run(reg.close_environments()) == 1000
