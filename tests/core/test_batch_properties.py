"""Property tests: the pure planner, and the executor on random batches (B-SCHED-5/7, B-ABORT).

The executor property drives random batches of one recording tool (keys starting with ``w``
are exclusive), with random failing bodies and a random deterministic abort point: in the
call's pre-execute, in its result observer, or in its body. No timing is involved.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolray.lowlevel import next_stage, plan_stages

from ._batch_helpers import Rig, code_of

modes_st = st.lists(st.sampled_from(["parallel", "exclusive"]), max_size=40)


@given(modes_st)
def test_b_sched_5_plan_stages_properties(modes: list[Any]) -> None:
    stages = plan_stages(modes)
    flat = [i for stage in stages for i in stage.indices]
    assert flat == list(range(len(modes)))  # order kept, nothing lost or duplicated
    for stage in stages:
        members = [modes[i] for i in stage.indices]
        assert members, "an empty stage"
        if stage.kind == "exclusive":
            assert members == ["exclusive"]  # every exclusive call alone
        else:
            assert set(members) == {"parallel"}
    for left, right in itertools.pairwise(stages):
        assert not (left.kind == right.kind == "parallel"), "parallel stages must be maximal"
    assert sum(s.kind == "exclusive" for s in stages) == modes.count("exclusive")


@given(st.integers(1, 50).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n - 1))))
def test_b_sched_5_next_stage_is_the_widest_extent(n_start: tuple[int, int]) -> None:
    count, start = n_start
    assert next_stage(start, count, "exclusive").indices == range(start, start + 1)
    widest = next_stage(start, count, "parallel")
    assert (widest.kind, widest.start, widest.stop) == ("parallel", start, count)


@pytest.mark.parametrize("start", [-1, 3])
def test_b_sched_5_next_stage_rejects_a_start_outside_the_batch(start: int) -> None:
    with pytest.raises(ValueError):
        next_stage(start, 3, "parallel")


# ---------------------------------------------------------------- the executor

call_st = st.tuples(st.booleans(), st.booleans())  # (exclusive, fails)
batch_st = st.tuples(
    st.lists(call_st, min_size=1, max_size=8),
    st.integers(1, 4),
    st.one_of(st.none(), st.tuples(st.integers(0, 7), st.sampled_from(["pre", "result", "body"]))),
)


async def _run_random_batch(specs: list[tuple[bool, bool]], cap: int, abort: Any) -> None:
    keys = [f"{'w' if exclusive else 'r'}{i}" for i, (exclusive, _) in enumerate(specs)]
    failing = {k for k, (_, fails) in zip(keys, specs, strict=True) if fails}
    async with Rig(fail=failing, hooks=False) as rig:
        target = None
        if abort is not None:
            index, where = abort
            target = keys[index % len(keys)]
            if where == "body":
                rig.before[target] = lambda c: rig.ctl.abort()
            elif where == "pre":

                async def pre(execution: Any, nxt: Any) -> Any:
                    if execution.call_id == f"c{target}":
                        rig.ctl.abort()
                    return await nxt()

                rig.reg.on_pre_execute(pre)
            else:

                def observer(execution: Any, result: Any) -> None:
                    if execution.call_id == f"c{target}":
                        rig.ctl.abort()

                rig.reg.on_result(observer)
        result = await asyncio.wait_for(rig.run(*keys, cap=cap), 10)
    rec = rig.rec
    # exactly one result per call, in input order
    assert [r.call_id for r in result.results] == [f"c{k}" for k in keys]
    # the log is balanced: each call's tool/call precedes its one tool/result
    labels = rig.log.labels()
    for key in keys:
        assert labels.count(f"tool/call:c{key}") == labels.count(f"tool/result:c{key}") == 1
        assert labels.index(f"tool/call:c{key}") < labels.index(f"tool/result:c{key}")
    assert rig.trace.of("tool/result") == [f"c{k}" for k in keys]
    # the cap holds, and nothing overlaps an exclusive call
    assert rec.max_running <= cap
    running: set[str] = set()
    for event in rec.events:
        kind, key = event.split(":", 1)
        if kind == "start":
            assert not any(k.startswith("w") for k in running), f"{key} overlaps {running}"
            assert not (key.startswith("w") and running), f"{key} started beside {running}"
            running.add(key)
        else:
            running.discard(key)
    # outcomes
    started = set(rec.starts)
    for key, item in zip(keys, result.results, strict=True):
        code = code_of(item.result)
        if key not in started:
            assert target is not None, f"{key} never started without an abort"
            assert code == "ABORTED_BEFORE_DISPATCH"
        elif key in failing:
            assert code == "error"
        else:
            assert code in ({"ok", "ABORTED"} if target is not None else {"ok"})


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(batch_st)
def test_b_sched_7_b_abort_3_executor_properties_on_random_batches(batch: Any) -> None:
    specs, cap, abort = batch
    asyncio.run(_run_random_batch(specs, cap, abort))
