"""Contract: environments behave the same on every backend (results, states, codes, texts).

In process, on Ray with an instance per process (per-scope executors, and sharded), and with
``isolation="shared"`` (states in the workers): a config, calls, snapshots; concurrent
batches losing no update; a fork diverging; nested calls inside their caller's turn; an
unknown environment, a failing ``create``, a body raising; close and reopen.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tests import envs
from tests.contract.conftest import SCOPES, WAIT_S, Backend, plain, wait_for_files
from toolray import ToolCall, ToolRunContext, define_environment, tool

A, B = SCOPES


def _counter(backend: Backend, **options: Any) -> dict[str, str]:
    """A counter environment and its tools under this test's names."""
    env = backend.name("counter")
    names = {k: backend.name(k) for k in ("incr", "peek", "twice", "boom")}
    backend.register_environment(define_environment(env, create=envs.make_counter, **options))

    @tool(name=names["incr"], environment=env)
    def incr(by: int, *, ctx: ToolRunContext) -> int:
        """Add ``by``."""
        ctx.environment["n"] += by
        ctx.environment["log"].append(by)
        return int(ctx.environment["n"])

    @tool(name=names["peek"], environment=env, concurrency_safe=True)
    def peek(*, ctx: ToolRunContext) -> int:
        """The value."""
        return int(ctx.environment["n"])

    twice_target = names["incr"]

    @tool(name=names["twice"], environment=env)
    async def twice(by: int, *, ctx: ToolRunContext) -> list[int]:
        """Two nested increments of this instance."""
        first = await ctx.dispatch(twice_target, {"by": by})
        second = await ctx.dispatch(twice_target, {"by": by})
        return [first.value, second.value]  # type: ignore[union-attr]

    @tool(name=names["boom"], environment=env)
    def boom(*, ctx: ToolRunContext) -> int:
        """A body that raises with the state in its message."""
        raise ValueError(f"the counter is at {ctx.environment['n']}")

    for definition in (incr, peek, twice, boom):
        backend.register(definition)
    return {"env": env, **names}


def _calls(*calls: tuple[str, Any]) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, args) for i, (name, args) in enumerate(calls)]


async def _state(backend: Backend, env: str, scope: str) -> Any:
    state = await backend.environment(env, scope).snapshot()
    return backend.agree({"n": state["n"], "log": state["log"]})


async def test_config_calls_snapshot_and_status(backend: Backend) -> None:
    t = _counter(backend)
    h = backend.environment(t["env"], A)
    opened = await h.open({"start": 10})
    assert (opened.state, opened.calls) == ("open", 0)
    await backend.run(
        _calls((t["incr"], {"by": 1}), (t["peek"], {}), (t["incr"], {"by": 2}), (t["boom"], {})), A
    )
    await backend.run(_calls((t["incr"], {"by": 5})), B)  # another scope: its own instance
    assert await _state(backend, t["env"], A) == {"n": 13, "log": [1, 2]}
    assert await _state(backend, t["env"], B) == {"n": 5, "log": [5]}
    status = await h.status()
    assert backend.agree([status.state, status.calls]) == ["open", 4]
    await backend.close_environments([t["env"]], [A, B])


async def test_concurrent_batches_lose_no_update_and_nested_calls_pass(backend: Backend) -> None:
    t = _counter(backend)
    await backend.environment(t["env"], A).open()
    batch = _calls(*[(t["incr"], {"by": 1})] * 5)
    racing = [backend.run(batch, A, agree=False) for _ in range(3)]  # their order: the race's
    outs = await asyncio.gather(*racing)
    seen = [[plain(r.result.value) for r in out.results] for out in outs]
    assert sorted(v for values in seen for v in values) == list(range(1, 16))  # none lost
    assert all(values == sorted(values) for values in seen)  # one batch's in its model order
    nested = await backend.run(_calls((t["twice"], {"by": 10})), A)
    assert plain(nested.results[0].result.value) == [25, 35]  # type: ignore[union-attr]
    assert (await _state(backend, t["env"], A))["n"] == 35
    await backend.close_environments([t["env"]], [A])


async def test_fork_then_diverge(backend: Backend) -> None:
    t = _counter(backend)
    h = backend.environment(t["env"], A)
    await h.open({"start": 1})
    await backend.run(_calls((t["incr"], {"by": 1})), A)
    child = await h.fork(B)
    assert child.scope == B
    await backend.run(_calls((t["incr"], {"by": 100})), B)
    await backend.run(_calls((t["incr"], {"by": 1})), A)
    assert await _state(backend, t["env"], A) == {"n": 3, "log": [1, 1]}
    assert await _state(backend, t["env"], B) == {"n": 102, "log": [1, 100]}
    await backend.close_environments([t["env"]], [A, B])


async def test_unknown_and_failing_environments_and_reopening(backend: Backend) -> None:
    t = _counter(backend)
    broken = backend.name("broken")

    def create(config: Any) -> Any:
        raise RuntimeError(f"no such task: {config}")

    backend.register_environment(define_environment(broken, create=create))
    use_broken, use_nowhere = backend.name("use_broken"), backend.name("use_nowhere")
    nowhere = backend.name("nowhere")

    @tool(name=use_broken, environment=broken)
    def use_b() -> int:
        """Uses the broken environment."""
        return 1

    @tool(name=use_nowhere, environment=nowhere)
    def use_n() -> int:
        """Uses an environment nobody registered."""
        return 1

    backend.register(use_b)
    backend.register(use_n)
    await backend.run(_calls((use_broken, {}), (use_nowhere, {}), (t["incr"], {"by": 1})), A)
    h = backend.environment(t["env"], A)
    await h.close()
    assert (await h.status()).state == "closed"
    await backend.run(_calls((t["incr"], {"by": 1})), A)  # a closed instance reopens fresh
    assert await _state(backend, t["env"], A) == {"n": 1, "log": [1]}
    await backend.close_environments([t["env"]], [A])


async def test_a_call_waiting_for_its_instance_ends_by_the_batch_deadline(
    backend: Backend, tmp_path: Path
) -> None:
    """A turn held by another batch: the waiting call never runs and is back in time."""
    t = _counter(backend)
    hold = backend.name("hold")
    gate = tmp_path / "open"

    @tool(name=hold, environment=t["env"])
    async def holder(*, ctx: ToolRunContext) -> int:
        """Holds the instance's turn until the gate opens."""
        (tmp_path / "held").touch()
        for _ in range(int(WAIT_S / 0.005)):
            if gate.exists():
                break
            await asyncio.sleep(0.005)
        return int(ctx.environment["n"])

    backend.register(holder)
    await backend.environment(t["env"], A).open()
    held = asyncio.ensure_future(backend.run(_calls((hold, {})), A))
    await wait_for_files(tmp_path, ["held"])
    late = await asyncio.wait_for(
        backend.run(_calls((t["incr"], {"by": 5})), A, deadline_s=0.5), WAIT_S
    )
    (one,) = late.results
    assert one.result.is_error
    assert one.result.error.info is not None
    assert (one.result.error.info.code, one.result.error.fault) == (
        "DEADLINE_EXCEEDED",
        "cancelled",
    )
    gate.touch()
    (done,) = (await asyncio.wait_for(held, WAIT_S)).results
    assert done.result.value == 0
    assert await _state(backend, t["env"], A) == {"n": 0, "log": []}  # the late one never ran
    await backend.close_environments([t["env"]], [A])


async def test_an_open_that_hangs_ends_by_the_batch_deadline(
    backend: Backend, tmp_path: Path
) -> None:
    """A tool's first call opens its instance; a ``create`` that hangs still ends in time."""
    slow, use = backend.name("slow"), backend.name("use_slow")
    gate = tmp_path / "open"

    def create(config: Any) -> Any:
        (tmp_path / "creating").touch()
        for _ in range(int(WAIT_S / 0.005)):
            if gate.exists():
                break
            time.sleep(0.005)
        return {"n": 0}

    backend.register_environment(define_environment(slow, create=create))

    @tool(name=use, environment=slow)
    def use_it(*, ctx: ToolRunContext) -> int:
        """Reads the slow environment."""
        return int(ctx.environment["n"])

    backend.register(use_it)
    late = await asyncio.wait_for(backend.run(_calls((use, {})), A, deadline_s=0.5), WAIT_S)
    gate.touch()
    (one,) = late.results
    assert one.result.is_error
    assert one.result.error.info is not None
    assert one.result.error.info.code == "DEADLINE_EXCEEDED"
    assert (tmp_path / "creating").exists()
    await backend.close_environments([slow], [A])
