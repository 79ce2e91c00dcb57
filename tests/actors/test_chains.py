"""Chained batches on real workers: a batch nobody can watch the order of (no hook, guard,
observer but counters, or log) goes to one worker at once, which starts each call in its
turn; every barrier, the cap, the results and a fault's reach stay what they are stage by
stage, and the executor sends far fewer messages."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.actors._waits import stats_when
from tests.tools import journal_tool, waiting_tool
from toolray import AbortController, Placement, ToolBatchInput, ToolCall

pytestmark = pytest.mark.ray


def _call(name: str, key: str, **args: Any) -> ToolCall:
    fields = ", ".join([f'"key": "{key}"'] + [f'"{k}": {str(v).lower()}' for k, v in args.items()])
    return ToolCall(key, name, "{" + fields + "}")


def _journal(directory: Path) -> list[str]:
    return (directory / "journal").read_text().splitlines()


def _check_barriers(journal: list[str], keys: list[str], exclusive: set[str]) -> None:
    """Every call before an exclusive one ended before it started; every later one started
    after it ended."""
    at = {line: i for i, line in enumerate(journal)}
    for i, x in enumerate(keys):
        if x not in exclusive:
            continue
        for before in keys[:i]:
            assert at[f"end {before}"] < at[f"start {x}"], (before, x, journal)
        for after in keys[i + 1 :]:
            assert at[f"end {x}"] < at[f"start {after}"], (x, after, journal)


def _spans(ex: Any) -> list[dict[str, Any]]:
    return [s for s in ex.last_trace if s.get("type") == "call"]


@pytest.mark.parametrize("isolation", ["call", "shared"])
async def test_a_batch_of_barriers_runs_as_one_chain_and_keeps_every_barrier(
    rt: Any, shared_rt: Any, scope_key: str, tmp_path: Path, isolation: str
) -> None:
    runtime = rt if isolation == "call" else shared_rt
    runtime.owned.append(runtime.registry.register(journal_tool("ch_journal", str(tmp_path))))
    keys = ["p1", "p2", "p3", "x4", "p5", "p6", "x7", "x8", "p9"]
    calls = [_call("ch_journal", k, x=k.startswith("x")) for k in keys]
    ex = runtime.executor(scope_key)
    before = await ex.statistics()
    out = await ex.execute_batch(ToolBatchInput(calls, AbortController().signal, scope=scope_key))
    assert [(r.call_id, r.result.value) for r in out.results] == [(k, k) for k in keys]
    _check_barriers(_journal(tmp_path), keys, {"x4", "x7", "x8"})
    spans = _spans(ex)
    assert len({s.get("chain") for s in spans}) == 1
    assert spans[0].get("chain")  # every call went in one chain
    assert len({s.get("worker") for s in spans}) == 1  # to one worker
    after = await ex.statistics()
    assert after.messages - before.messages < 6  # stage by stage: one message a stage at least


async def test_the_cap_holds_on_the_chains_worker(rt: Any, scope_key: str, tmp_path: Path) -> None:
    rt.owned.append(rt.registry.register(journal_tool("ch_capped", str(tmp_path))))
    keys = [f"p{i}" for i in range(6)] + ["x6"]
    calls = [_call("ch_capped", k, x=k.startswith("x"), ms=30) for k in keys]
    batch = ToolBatchInput(
        calls, AbortController().signal, scope=scope_key, max_parallel_tool_calls=2
    )
    out = await rt.executor(scope_key).execute_batch(batch)
    assert not any(r.result.is_error for r in out.results)
    running = widest = 0
    for line in _journal(tmp_path):
        running += 1 if line.startswith("start") else -1
        widest = max(widest, running)
    assert widest <= 2
    _check_barriers(_journal(tmp_path), keys, {"x6"})


async def test_a_crash_in_a_chain_fails_its_own_call_and_the_later_stages_run(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt.owned.append(rt.registry.register(journal_tool("ch_crashy", str(tmp_path))))
    calls = [
        _call("ch_crashy", "p1"),
        _call("ch_crashy", "p2", crash=True),
        _call("ch_crashy", "p3"),
        _call("ch_crashy", "x4", x=True),
        _call("ch_crashy", "p5"),
    ]
    ex = rt.executor(scope_key)
    out = await ex.execute_batch(ToolBatchInput(calls, AbortController().signal, scope=scope_key))
    codes = [r.result.error.info.code if r.result.is_error else r.result.value for r in out.results]
    assert codes == ["p1", "WORKER_LOST", "p3", "x4", "p5"]
    journal = _journal(tmp_path)
    assert journal.index("start x4") > max(journal.index("end p1"), journal.index("end p3"))
    assert _spans(ex)[0].get("chain")


async def test_an_abort_mid_chain_leaves_the_later_stages_unstarted(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt.owned.append(rt.registry.register(waiting_tool("ch_wait", str(tmp_path))))
    rt.owned.append(rt.registry.register(journal_tool("ch_after", str(tmp_path))))
    calls = [
        ToolCall("g1", "ch_wait", '{"key": "g1"}'),  # it ends when the abort reaches it
        _call("ch_after", "x2", x=True),
        _call("ch_after", "p3"),
    ]
    ctrl = AbortController()
    ex = rt.executor(scope_key)
    task = asyncio.ensure_future(
        ex.execute_batch(ToolBatchInput(calls, ctrl.signal, scope=scope_key))
    )
    for _ in range(2000):  # bounded: the body marks its start
        if (tmp_path / "g1.started").exists():
            break
        await asyncio.sleep(0.01)
    ctrl.abort("enough")
    out = await asyncio.wait_for(task, 30)
    codes = [r.result.error.info.code for r in out.results]
    assert codes == ["ABORTED", "ABORTED_BEFORE_DISPATCH", "ABORTED_BEFORE_DISPATCH"]
    assert not (tmp_path / "journal").exists()  # neither later call ever started


async def test_a_hook_keeps_the_batch_stage_by_stage(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt.owned.append(rt.registry.register(journal_tool("ch_hooked", str(tmp_path))))
    rt.owned.append(rt.registry.on_post_execute(lambda execution, result, nxt: nxt()))
    keys = ["p1", "x2", "p3"]
    ex = rt.executor(scope_key)
    calls = [_call("ch_hooked", k, x=k.startswith("x")) for k in keys]
    out = await ex.execute_batch(ToolBatchInput(calls, AbortController().signal, scope=scope_key))
    assert [r.result.value for r in out.results] == keys
    assert [s.get("chain") for s in _spans(ex)] == [None, None, None]
    _check_barriers(_journal(tmp_path), keys, {"x2"})


async def test_a_wide_stage_rolls_its_cap_on_the_chains_worker(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    rt.owned.append(rt.registry.register(journal_tool("ch_wide", str(tmp_path))))
    keys = [f"p{i}" for i in range(12)]
    ex = rt.executor(scope_key)
    calls = [_call("ch_wide", k) for k in keys]
    batch = ToolBatchInput(
        calls, AbortController().signal, scope=scope_key, max_parallel_tool_calls=3
    )
    out = await ex.execute_batch(batch)
    assert [r.result.value for r in out.results] == keys
    assert all(s.get("chain") for s in _spans(ex))  # wider than its cap: one chain
    running = widest = 0
    for line in _journal(tmp_path):
        running += 1 if line.startswith("start") else -1
        widest = max(widest, running)
    assert widest <= 3
    narrow = [_call("ch_wide", f"n{i}") for i in range(3)]
    await ex.execute_batch(ToolBatchInput(narrow, AbortController().signal, scope=scope_key))
    assert [s.get("chain") for s in _spans(ex)] == [None, None, None]  # one stage, in its cap


async def test_a_pool_that_runs_one_body_at_a_time_is_never_chained(
    rt: Any, scope_key: str, tmp_path: Path
) -> None:
    one = Placement(max_concurrency=1)
    rt.owned.append(rt.registry.register(journal_tool("ch_one", str(tmp_path), one)))
    keys = ["p1", "p2", "x3", "p4"]
    ex = rt.executor(scope_key)
    calls = [_call("ch_one", k, x=k.startswith("x")) for k in keys]
    out = await ex.execute_batch(ToolBatchInput(calls, AbortController().signal, scope=scope_key))
    assert [r.result.value for r in out.results] == keys
    assert [s.get("chain") for s in _spans(ex)] == [None] * 4
    _check_barriers(_journal(tmp_path), keys, {"x3"})


@pytest.mark.parametrize("isolation", ["call", "shared"])
async def test_chains_under_sigkills_lose_nothing_run_nothing_twice_and_keep_their_barriers(
    rt: Any, scope_key: str, tmp_path: Path, isolation: str
) -> None:
    """Agents send chained batches while running calls' processes and their workers are
    SIGKILLed: every call gets one result in model order, no body starts twice, a success
    ran once to its end, and every barrier held among the calls that ran."""
    import random
    import signal

    import psutil

    placement = Placement(size=2, spare=0, isolation=isolation)  # a pool of the test's own
    tool = journal_tool("ch_faults", str(tmp_path), placement, pids=True)
    rt.owned.append(rt.registry.register(tool))
    pattern = ["p", "p", "p", "x", "p", "p", "x", "p"]
    batches: list[tuple[list[str], Any]] = []
    done = asyncio.Event()

    async def agent(name: str) -> None:
        ex = rt.executor(f"{scope_key}-{name}")
        n = 0
        while not done.is_set():
            n += 1
            keys = [f"{name}.{n}.{i}{kind}" for i, kind in enumerate(pattern)]
            calls = [_call("ch_faults", k, x=k.endswith("x")) for k in keys]
            batch = ToolBatchInput(
                calls, AbortController().signal, scope=f"{scope_key}-{name}",
                max_parallel_tool_calls=3,
            )  # fmt: skip
            batches.append((keys, await ex.execute_batch(batch)))

    def running() -> list[int]:
        """Pids of bodies that started and have not ended (from the journal)."""
        path = tmp_path / "journal"
        words = [x.split() for x in (path.read_text().splitlines() if path.exists() else [])]
        ended = {w[1] for w in words if w[0] == "end"}
        return [int(w[2]) for w in words if w[0] == "start" and w[1] not in ended]

    agents = [asyncio.ensure_future(agent(name)) for name in ("a", "b", "c")]
    rng, kills, worker_kills = random.Random(7), 0, 0
    before = rt.stats()
    try:
        for _ in range(600):  # a bound: 8 kills, unless an agent stopped (its error shows)
            if kills == 8 or any(a.done() for a in agents):
                break
            await asyncio.sleep(0.2)  # a pace for the faults, not a synchronisation
            pids = running()
            if not pids:
                continue
            try:
                victim: Any = psutil.Process(rng.choice(pids))
                worker = isolation == "shared"  # the body runs in its worker
                if isolation == "call" and rng.random() < 0.4:  # its worker: template's keeper's
                    victim, worker = victim.parents()[2], True
                victim.send_signal(signal.SIGKILL)
                kills += 1
                worker_kills += worker
            except (psutil.Error, AttributeError):  # it ended meanwhile
                continue
    finally:
        done.set()
        await asyncio.gather(*agents)

    assert kills == 8
    journal = _journal(tmp_path)
    starts: dict[str, int] = {}
    for line in journal:
        if line.startswith("start "):
            key = line.split()[1]
            starts[key] = starts.get(key, 0) + 1
    ended = {line.split()[1] for line in journal if line.startswith("end ")}
    lines = [" ".join(line.split()[:2]) for line in journal]  # "start <key>", pid left out
    assert max(starts.values()) == 1  # no body ran twice
    codes: set[str] = set()
    for keys, out in batches:
        assert [r.call_id for r in out.results] == keys  # one result each, in model order
        for key, r in zip(keys, out.results, strict=True):
            if r.result.is_error:
                codes.add(r.result.error.info.code)
            else:
                assert starts.get(key) == 1, key  # a success ran once…
                assert key in ended, key  # …to its end
        complete = [k for k in keys if k in ended]  # every barrier, among the calls that ran
        _check_barriers(lines, complete, {k for k in complete if k.endswith("x")})
    assert codes <= {"WORKER_LOST"}, codes
    assert sum(r.result.is_error for _, out in batches for r in out.results) >= 1
    # the pool replaced every killed worker by itself (a worker killed between its calls
    # too), and a chained batch after the faults runs to its end: a call sent to a worker
    # its pool knew dead goes to a live one (before, it failed WORKER_LOST without running)
    await stats_when(rt, lambda s: s.replacements - before.replacements >= worker_kills)
    keys = [f"after.{i}{kind}" for i, kind in enumerate(pattern)]
    calls = [_call("ch_faults", k, x=k.endswith("x")) for k in keys]
    out = await rt.executor(scope_key).execute_batch(
        ToolBatchInput(calls, AbortController().signal, scope=scope_key, max_parallel_tool_calls=3)
    )
    assert [r.result.value for r in out.results] == keys
