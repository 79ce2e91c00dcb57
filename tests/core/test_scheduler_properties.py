"""The scheduler against a reference model (B-SCHED-5/7/12/14, B-ABORT-3, C-CODE-6/7).

The engine (``toolray.scheduler._engine.Scheduler``) runs random calls — parallel or
exclusive (keys starting with ``w``) — on a closed lane (a batch: every call known at once)
or an open lane (calls arriving between settles, like a program's sub-calls). Each body
waits for its own event; the test releases one running body at a time, in an order chosen
by Hypothesis, and may abort a closed lane at any point. After every step the bodies that
run must be exactly those the model runs, and at the end the engine's whole schedule —
stage openings, starts, settles, commits and the skipped tail — must be the model's.

The model states the rules directly (no planner): calls start in order; an exclusive call
starts only when nothing runs and every earlier call committed, and holds the lane until
its commit; a parallel call starts while fewer than ``cap`` run and no exclusive call is
uncommitted; commits follow call order; a stage opens with a call that cannot join the
stage before it; once aborted, nothing starts and the calls never started are skipped when
the running ones have drained. The stages the engine opened on a closed lane are also
``plan_stages`` of the modes: the tested planner is the one that runs.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolray import AbortController, ToolExecutionInput, ToolOutput, ToolRegistry, define_tool
from toolray import text_block as text
from toolray.lowlevel import Call, run_body_inline
from toolray.scheduler._engine import Hooks, Scheduler
from toolray.scheduler._plan import ExecutionMode, Stage, plan_stages


# ---------------------------------------------------------------- the reference model
@dataclass
class Model:
    """The scheduling rules, stepped by the same actions as the engine."""

    modes: list[ExecutionMode]
    cap: int
    known: int
    events: list[str] = field(default_factory=list)
    next: int = 0
    running: list[int] = field(default_factory=list)
    done: set[int] = field(default_factory=set)
    committed: int = 0
    barrier: int | None = None  # an exclusive call started and not yet committed
    stage: ExecutionMode | None = None  # the kind of the open stage
    aborted: bool = False

    def _can_start(self, k: int) -> bool:
        if self.barrier is not None:
            return False
        if self.modes[k] == "exclusive":
            return not self.running and self.committed == k
        return len(self.running) < self.cap

    def _fill(self) -> None:
        while not self.aborted and self.next < self.known and self._can_start(self.next):
            k = self.next
            if self.stage != "parallel" or self.modes[k] != "parallel":
                self.stage = self.modes[k]
                self.events.append(f"stage:{self.stage}:{k}")
            self.events.append(f"start:{k}")
            self.running.append(k)
            if self.modes[k] == "exclusive":
                self.barrier = k
            self.next += 1

    def _settle_lane(self) -> None:
        self._fill()
        if self.running:
            return
        self.stage = None  # drained
        if self.aborted:
            self.events.append(f"skip:{self.next}-{self.known}")
            self.next = self.known
        else:
            self._fill()

    def begin(self) -> None:
        self._settle_lane()

    def release(self, k: int) -> None:
        self.running.remove(k)
        self.done.add(k)
        self.events.append(f"settle:{k}")
        while self.committed in self.done:
            self.events.append(f"commit:{self.committed}")
            if self.barrier == self.committed:
                self.barrier = None
            self.committed += 1
        self._settle_lane()

    def submit(self) -> None:
        self.known += 1
        self._settle_lane()

    def abort(self) -> None:
        self.aborted = True  # seen at the next checkpoint: after the next settle


# ---------------------------------------------------------------- the engine under test
class Recorder(Hooks):
    def __init__(self) -> None:
        self.events: list[str] = []
        self.stages: list[Stage] = []
        self.changed = asyncio.Event()

    def note(self, event: str) -> None:
        self.events.append(event)
        self.changed.set()

    def stage(self, stage: Stage) -> None:
        self.stages.append(stage)
        self.note(f"stage:{stage.kind}:{stage.start}")

    def started(self, index: int, mode: ExecutionMode) -> None:
        self.note(f"start:{index}")

    def settled(self, index: int, call: Call) -> None:
        self.note(f"settle:{index}")

    async def committed(self, index: int, call: Call, result: Any) -> None:
        assert not result.is_error or result.error.info.code == "ABORTED", result
        self.note(f"commit:{index}")

    def skipped(self, start: int, stop: int) -> None:
        self.note(f"skip:{start}-{stop}")


class Bodies:
    """Each call's body waits for its own event; entering bodies are recorded."""

    def __init__(self) -> None:
        self.entered: set[int] = set()
        self.gates: dict[int, asyncio.Event] = {}
        self.changed = asyncio.Event()

    async def body(self, args: Any, ctx: Any) -> str:
        k = int(args["key"].lstrip("w"))
        self.entered.add(k)
        self.changed.set()
        await self.gates.setdefault(k, asyncio.Event()).wait()
        return "ok"

    async def until(self, predicate: Any, recorder: Recorder) -> None:
        async def wait() -> None:
            while not predicate():
                self.changed.clear()
                recorder.changed.clear()
                events = (self.changed, recorder.changed)
                waiters = [asyncio.ensure_future(e.wait()) for e in events]
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                for waiter in waiters:
                    waiter.cancel()

        await asyncio.wait_for(wait(), 10)


def _registry(bodies: Bodies) -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(
        define_tool(
            name="t",
            description=None,
            parameters={"key": {"type": "string", "required": True}},
            output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text(v)]),
            execute=bodies.body,
            is_concurrency_safe=lambda args: not args["key"].startswith("w"),
        )
    )
    return reg


def _input(k: int, mode: ExecutionMode, signal: Any) -> ToolExecutionInput:
    key = f"{'w' if mode == 'exclusive' else ''}{k}"
    return ToolExecutionInput(f"c{k}", "t", {"key": key}, signal)


async def _release(k: int, bodies: Bodies, recorder: Recorder, model: Model) -> None:
    bodies.gates.setdefault(k, asyncio.Event()).set()
    await bodies.until(lambda: f"settle:{k}" in recorder.events, recorder)
    model.release(k)


async def _scenario(
    modes: list[ExecutionMode], cap: int, steps: list[int], open_lane: bool
) -> None:
    bodies, recorder, ctl = Bodies(), Recorder(), AbortController()
    reg = _registry(bodies)
    inputs = [_input(k, mode, ctl.signal) for k, mode in enumerate(modes)]
    callers: list[asyncio.Task[None]] = []
    if open_lane:
        scheduler = Scheduler(reg, ctl.signal, cap, run_body_inline, recorder)
        model = Model(modes, cap, known=0)
    else:
        scheduler = Scheduler(reg, ctl.signal, cap, run_body_inline, recorder, calls=inputs)
        model = Model(modes, cap, known=len(modes))
        callers.append(asyncio.ensure_future(scheduler.run()))

    def submit() -> None:  # a program's next call: queued, then served by whoever drives
        k = model.known
        scheduler.submit(inputs[k])
        done = f"commit:{k}"
        callers.append(asyncio.ensure_future(scheduler.serve(lambda: done in recorder.events)))
        model.submit()

    if open_lane:
        submit()
    else:
        model.begin()
    for step in steps:
        await bodies.until(lambda: bodies.entered >= set(model.running), recorder)
        assert bodies.entered - model.done == set(model.running)
        if step < 0 and open_lane and model.known < len(modes):
            submit()
        elif step < 0 and not open_lane and not model.aborted:
            ctl.abort()
            model.abort()
        elif model.running:
            await _release(model.running[step % len(model.running)], bodies, recorder, model)
    while model.running:  # release what still runs, oldest first
        await bodies.until(lambda: bodies.entered >= set(model.running), recorder)
        await _release(model.running[0], bodies, recorder, model)
    await asyncio.wait_for(asyncio.gather(*callers), 10)
    last = model.events[-1]
    await bodies.until(lambda: bool(recorder.events) and recorder.events[-1] == last, recorder)
    assert recorder.events == model.events
    if not open_lane and not model.aborted:  # the stages opened are the planner's plan
        plan = plan_stages(modes)
        assert [(s.kind, s.start) for s in recorder.stages] == [(s.kind, s.start) for s in plan]


modes_st = st.lists(st.sampled_from(["parallel", "exclusive"]), min_size=1, max_size=10)
steps_st = st.lists(st.integers(-1, 9), max_size=40)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modes_st, st.integers(1, 4), steps_st)
def test_b_sched_5_closed_lane_schedule_matches_the_model(
    modes: list[ExecutionMode], cap: int, steps: list[int]
) -> None:
    asyncio.run(_scenario(modes, cap, steps, open_lane=False))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modes_st, st.integers(1, 4), steps_st)
def test_c_code_6_open_lane_schedule_matches_the_model(
    modes: list[ExecutionMode], cap: int, steps: list[int]
) -> None:
    asyncio.run(_scenario(modes, cap, steps, open_lane=True))


def test_b_sched_13_the_planner_refuses_a_call_outside_the_stage() -> None:
    from toolray.scheduler._plan import cut, joins, next_stage

    stage = next_stage(2, 6, "parallel")
    assert joins(stage, 3, "parallel")
    assert not joins(stage, 3, "exclusive")
    assert cut(stage, 4).indices == range(2, 4)
    for index in (2, 6):  # the head itself, or past the extent
        with pytest.raises(ValueError):
            joins(stage, index, "parallel")
    for stop in (2, 7):  # a stage keeps its head and cannot grow
        with pytest.raises(ValueError):
            cut(stage, stop)
