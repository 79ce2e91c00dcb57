"""A worker's chain gates, without Ray: turns, barriers, the cap, aborts and given-back places."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest

from toolray import (
    AbortController,
    AbortError,
    BatchExecutor,
    ToolBatchInput,
    ToolCall,
    ToolExecutionInput,
    ToolOutput,
    ToolRegistry,
    define_tool,
    text_block,
)
from toolray.errors import TOOL_ABORTED_BEFORE_DISPATCH
from toolray.lowlevel import (
    Link,
    observe,
    parse_arguments,
    run_body_inline,
)
from toolray.scheduler._chain import plan_chain
from toolray_actors.execution._chain_gate import ChainGates


def _link(position: int, stage_start: int, *, size: int = 4, cap: int = 10) -> Link:
    return Link(chain="c", position=position, stage_start=stage_start, size=size, cap=cap)


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_stage_waits_until_every_call_of_the_earlier_stages_has_ended() -> None:
    gates = ChainGates()
    # [0, 1] parallel, [2] exclusive, [3] parallel
    links = [_link(0, 0), _link(1, 0), _link(2, 2, cap=1), _link(3, 3)]
    entered = [asyncio.ensure_future(gates.enter(f"t{k}", link)) for k, link in enumerate(links)]
    await _settle()
    assert [e.done() for e in entered] == [True, True, False, False]
    gates.leave("t", links[0], ended=True)
    await _settle()
    assert not entered[2].done()  # call 1 still runs: the barrier holds
    gates.leave("t", links[1], ended=True)
    await _settle()
    assert entered[2].done()
    assert entered[2].result() is True
    assert not entered[3].done()  # the exclusive call runs alone
    gates.leave("t", links[2], ended=True)
    await _settle()
    assert entered[3].result() is True
    assert gates.held == 0


async def test_calls_of_a_stage_start_in_model_order_and_at_most_cap_at_once() -> None:
    gates = ChainGates()
    links = [_link(k, 0, size=4, cap=2) for k in range(4)]
    # they arrive out of order: the later ones wait for the earlier ones to start
    late = asyncio.ensure_future(gates.enter("t3", links[3]))
    await _settle()
    assert not late.done()
    first = [asyncio.ensure_future(gates.enter(f"t{k}", links[k])) for k in range(3)]
    await _settle()
    assert [f.done() for f in first] == [True, True, False]  # the cap
    gates.leave("t", links[1], ended=True)
    await _settle()
    assert first[2].done()
    assert not late.done()
    gates.leave("t", links[0], ended=True)
    await _settle()
    assert late.done()


async def test_an_abort_stops_the_whole_chain_and_leaves_the_running_call_to_its_ladder() -> None:
    gates = ChainGates()
    links = [_link(k, k, size=4, cap=1) for k in range(4)]
    assert await gates.enter("t0", links[0]) is True
    held = asyncio.ensure_future(gates.enter("t1", links[1]))
    after = asyncio.ensure_future(gates.enter("t2", links[2]))
    await _settle()
    # the control lane aborts from another thread: the running call first, then a held one
    found: list[bool] = []
    thread = threading.Thread(target=lambda: found.extend([gates.abort("t0"), gates.abort("t1")]))
    thread.start()
    thread.join()
    await _settle()
    assert found == [False, True]  # the running call is not the gate's to stop
    assert held.result() is False  # never started
    assert after.result() is False  # its mates share the signal: none starts
    assert await gates.enter("t3", links[3]) is False  # nor one that comes later
    gates.leave("t0", links[0], ended=True)
    assert gates.held == 0


async def test_seal_says_which_stages_were_over_when_the_chain_stopped() -> None:
    gates = ChainGates()
    links = [_link(0, 0, size=3, cap=1), _link(1, 1, size=3, cap=1), _link(2, 2, size=3, cap=1)]
    assert await gates.enter("t0", links[0]) is True
    gates.leave("t0", links[0], ended=True)
    assert await gates.enter("t1", links[1]) is True  # stage 2 began: stage 1 is sealed
    held = asyncio.ensure_future(gates.enter("t2", links[2]))
    await _settle()
    assert gates.seal(links[1]) == 1  # call 0 stands; call 1 was running
    await _settle()
    assert held.result() is False  # the chain stopped
    gates.leave("t1", links[1], ended=True)
    assert gates.seal(links[0]) == 1  # asked again, after the chain ended: the same answer
    fresh = ChainGates()
    assert fresh.seal(_link(0, 0, size=1)) == 0  # stopped before anything began


async def test_an_abort_before_its_request_comes_is_kept_for_it() -> None:
    gates = ChainGates()
    assert gates.abort("t0") is False  # not here yet
    assert await gates.enter("t0", _link(0, 0, size=2)) is False
    assert await gates.enter("t1", _link(1, 1, size=2)) is True  # its place counted as ended


async def test_the_executors_word_that_a_call_will_not_come_lets_later_stages_go() -> None:
    gates = ChainGates()
    links = [_link(0, 0, size=2, cap=1), _link(1, 1, size=2, cap=1)]
    later = asyncio.ensure_future(gates.enter("t1", links[1]))
    await _settle()
    assert not later.done()
    gates.done(links[0])
    await _settle()
    assert later.result() is True


async def test_a_call_given_back_unrun_keeps_its_place_until_it_comes_again() -> None:
    gates = ChainGates()
    links = [_link(0, 0, size=2, cap=1), _link(1, 1, size=2, cap=1)]
    assert await gates.enter("t0", links[0]) is True
    later = asyncio.ensure_future(gates.enter("t1", links[1]))
    gates.leave("t", links[0], ended=False)  # answered "missing": it is sent again
    await _settle()
    assert not later.done()
    assert await gates.enter("t0b", links[0]) is True
    gates.leave("t", links[0], ended=True)
    await _settle()
    assert later.result() is True


async def test_an_abandoned_waiting_call_ends_its_place() -> None:
    gates = ChainGates()
    links = [_link(0, 0, size=3, cap=1), _link(1, 1, size=3, cap=1), _link(2, 2, size=3, cap=1)]
    assert await gates.enter("t0", links[0]) is True
    abandoned = asyncio.ensure_future(gates.enter("t1", links[1]))
    last = asyncio.ensure_future(gates.enter("t2", links[2]))
    await _settle()
    abandoned.cancel()
    with pytest.raises(asyncio.CancelledError):
        await abandoned
    gates.leave("t", links[0], ended=True)
    await _settle()
    assert last.result() is True


# ---------------------------------------------------------------- the engine with a gating runner
class GatingRunner:
    """An in-process ``ChainRunner``: linked bodies wait at a ``ChainGates`` for their turn."""

    def __init__(self) -> None:
        self.gates = ChainGates()
        self.linked: list[str] = []
        self.unlinked_links: list[Link] = []
        self._ids = itertools.count(1)

    def chainable(self, definition: Any, cap: int) -> bool:
        return True

    def chain(self) -> str:
        return f"g{next(self._ids)}"

    def unlinked(self, link: Link) -> None:
        self.unlinked_links.append(link)
        self.gates.done(link)

    async def sealed(self, link: Link) -> bool:
        return link.position < self.gates.seal(link)

    async def __call__(self, call: Any, entry: Any, ctx: Any) -> Any:
        link = call.link
        if link is None:
            return await run_body_inline(call, entry, ctx)
        self.linked.append(call.input.call_id)
        token = f"{link.chain}/{link.position}"
        remove = ctx.signal.add_listener(lambda: self.gates.abort(token))
        try:
            if not await self.gates.enter(token, link):
                raise AbortError("tool call aborted before dispatch", TOOL_ABORTED_BEFORE_DISPATCH)
        finally:
            remove()
        try:
            return await run_body_inline(call, entry, ctx)
        finally:
            self.gates.leave(token, link, ended=True)


def _journal_tool(
    journal: list[str], held: dict[str, asyncio.Event], started: asyncio.Event | None = None
) -> Any:
    async def body(args: Any, ctx: Any) -> Any:
        key = args["key"]
        journal.append(f"start:{key}")
        if started is not None:
            started.set()
        if key in held:
            await held[key].wait()
        for _ in range(3):
            await asyncio.sleep(0)  # siblings overlap
        journal.append(f"end:{key}")
        return key

    return define_tool(
        name="j",
        description="journals its start and end",
        parameters={"key": {"type": "string", "required": True}, "x": {"type": "boolean"}},
        output=ToolOutput(schema={"type": "string"}, render=lambda a, v: [text_block(v)]),
        execute=body,
        is_concurrency_safe=lambda args: not args.get("x"),
    )


def _calls(*specs: str) -> list[ToolCall]:
    """``p1`` a parallel call, ``x2`` an exclusive one, ``bad3`` arguments that do not parse
    (an exclusive call that fails ``INVALID_ARGS``)."""
    calls = []
    for spec in specs:
        if spec.startswith("bad"):
            calls.append(ToolCall(spec, "j", "{not json"))
        else:
            x = "true" if spec.startswith("x") else "false"
            calls.append(ToolCall(spec, "j", f'{{"key": "{spec}", "x": {x}}}'))
    return calls


async def _run(
    registry: ToolRegistry, runner: Any, calls: list[ToolCall], signal: Any = None, cap: int = 10
) -> Any:
    executor = BatchExecutor(registry, runner=runner)
    batch = ToolBatchInput(calls, signal or AbortController().signal, max_parallel_tool_calls=cap)
    return await executor.execute(batch)


def _wire(result: Any) -> list[Any]:
    return [(r.call_id, r.result.to_wire()) for r in result.results]


async def test_a_chained_batch_keeps_every_barrier_and_gives_the_same_results() -> None:
    specs = ("p1", "p2", "x3", "bad4", "p5", "p6", "x7", "p8")
    journal: list[str] = []
    registry = ToolRegistry()
    registry.register(_journal_tool(journal, {}))
    runner = GatingRunner()
    chained = await _run(registry, runner, _calls(*specs))
    assert runner.linked == list(specs)
    plain = await _run(registry, None, _calls(*specs))
    assert _wire(chained) == _wire(plain)

    def at(event: str) -> int:
        return journal.index(event)

    assert max(at("end:p1"), at("end:p2")) < at("start:x3")
    assert at("end:x3") < min(at("start:p5"), at("start:p6"))
    assert max(at("end:p5"), at("end:p6")) < at("start:x7") < at("end:x7") < at("start:p8")
    assert at("start:p2") < at("end:p1")  # a group's calls still overlap


async def test_the_cap_holds_in_a_chained_stage() -> None:
    journal: list[str] = []
    registry = ToolRegistry()
    registry.register(_journal_tool(journal, {}))
    runner = GatingRunner()
    await _run(registry, runner, _calls("p1", "p2", "p3", "p4", "x5"), cap=2)
    running = widest = 0
    for event in journal:
        running += 1 if event.startswith("start:") else -1
        widest = max(widest, running)
    assert runner.linked
    assert widest == 2


async def test_an_abort_mid_chain_gives_what_stage_by_stage_gives() -> None:
    async def run(runner: Any) -> Any:
        journal: list[str] = []
        held = {"p1": asyncio.Event()}
        started = asyncio.Event()
        registry = ToolRegistry()
        registry.register(_journal_tool(journal, held, started))
        ctrl = AbortController()
        task = asyncio.ensure_future(_run(registry, runner, _calls("p1", "x2", "p3"), ctrl.signal))
        await started.wait()
        ctrl.abort("stop")
        held["p1"].set()
        return await task, journal

    chained, chained_journal = await run(GatingRunner())
    plain, _ = await run(None)
    codes = [r.result.error.info.code for r in chained.results]
    assert codes == ["ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert _wire(chained) == _wire(plain)
    assert "start:x2" not in chained_journal


async def test_what_can_see_the_order_keeps_the_lane_stage_by_stage() -> None:
    registry = ToolRegistry()
    registry.register(_journal_tool([], {}))
    specs = ("p1", "x2", "p3")
    runner = GatingRunner()
    dispose = registry.on_post_execute(lambda execution, result, nxt: nxt())
    await _run(registry, runner, _calls(*specs))
    dispose()
    dispose = registry.guard(lambda execution: None)
    await _run(registry, runner, _calls(*specs))
    dispose()
    assert runner.linked == []
    seeing = observe(_Seeing())
    await _run(registry, runner, _calls(*specs))
    seeing()
    assert runner.linked == []
    counting = observe(_Counting())
    await _run(registry, runner, _calls(*specs))
    counting()
    assert runner.linked == ["p1", "x2", "p3"]
    await _run(registry, runner, _calls("p4", "p5"))  # one stage: no barrier to save
    assert runner.linked == ["p1", "x2", "p3"]


class _Seeing:
    def batch_started(self, batch: Any) -> Any:
        return None

    def batch_ended(self, batch: Any, error: Any) -> None:
        pass

    def call_started(self, call: Any, parent: Any) -> Any:
        return None

    def call_ended(self, call: Any, end: Any) -> None:
        pass


class _Counting(_Seeing):
    counts_only = True


def test_plan_chain_takes_barriers_and_rolling_pools_and_declines_what_the_runner_cannot_gate() -> (
    None
):
    registry = ToolRegistry()
    registry.register(_journal_tool([], {}))
    signal = AbortController().signal
    inputs = [
        ToolExecutionInput(c.id, c.name, parse_arguments(c.arguments), signal)
        for c in _calls("p1", "x2")
    ]
    runner = GatingRunner()
    stages = plan_chain(registry, inputs, 0, runner, 10)
    assert stages is not None
    assert [(s.kind, s.start, s.stop) for s in stages] == [
        ("parallel", 0, 1),
        ("exclusive", 1, 2),
    ]
    wide = [ToolExecutionInput(f"w{i}", "j", {"key": f"w{i}"}, signal) for i in range(3)]
    assert plan_chain(registry, wide, 0, runner, 3) is None  # one stage within its cap
    assert plan_chain(registry, wide, 0, runner, 2) is not None  # a pool that rolls
    runner.chainable = lambda definition, cap: False  # type: ignore[method-assign]
    assert plan_chain(registry, inputs, 0, runner, 10) is None
