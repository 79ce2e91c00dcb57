"""The soak's mixed load (``benchmarks/soak.py``): lanes of agents that run until told to stop.

Every lane submits batches to a running :class:`RayRuntime` and books each call's outcome in
one :class:`Book` (ok, failed by code, *lost*: a call without a result). The lanes:

- ``rollout``: trajectories of 4 turns × 4 concurrency-safe calls of the rollout tool (about
  3 % hang deaf to cancellation and are killed, 1 % end their process), each trajectory in a
  scope of its own created for it (a restriction) and disposed after its last turn;
- ``env``: agents stepping a ``tally`` environment (``_chaos_env``): opened, bumped, forked
  every 7th step, parked when idle for 3 s (the agent pauses now and then), closed and its
  scope disposed after 20 steps, then a new one;
- ``code``: Code Mode programs (``run_code`` gathering 5 sub-calls; every 5th raises);
- ``rate``: 8-call batches of a tool limited to 5 calls/s (burst 2, ``max_wait_ms`` 1000):
  the calls past the limit fail ``RATE_LIMITED`` at once;
- ``churn``: scopes created (a tool, a restriction, a ``schemas()`` view), every 5th running a
  batch, then disposed.

No fault is injected from outside: an environment lost, or a call without a result, is a bug.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolray import (
    AbortController,
    RateLimit,
    TimeoutPolicy,
    ToolBatchInput,
    ToolBatchResult,
    ToolCall,
    tool,
)
from toolray_actors.bench._chaos_env import Tally, tally_kit
from toolray_actors.bench._rollout_plan import RolloutPlan, rollout_tool

if TYPE_CHECKING:
    from toolray_actors.driver._runtime import RayRuntime

__all__ = ("EXPECTED", "LANES", "Book", "Json", "register", "run_lanes", "wake")

Json = dict[str, Any]
"""A record of the soak as it is written (samples, counts, verdicts)."""

EXPECTED: dict[str, frozenset[str]] = {
    "rollout": frozenset({"TOOL_TIMEOUT", "WORKER_LOST"}),
    "env": frozenset(),
    "code": frozenset({"CODE_RUN_FAILED"}),
    "rate": frozenset({"RATE_LIMITED"}),
    "churn": frozenset(),
    "wake": frozenset(),
}
"""The failure codes each lane's own faults may show (anything else is *unexpected*)."""

LANES = {"rollout": 4, "env": 3, "code": 2, "rate": 1, "churn": 1}
"""Agents per lane."""

_PLAN = RolloutPlan(hang_s=60.0)
_PROGRAM = "import asyncio\nsum(await asyncio.gather(*(soak_square(n=i) for i in range(5))))"
_FAILING = "raise ValueError('a program that fails')"
_ENV_STEPS = 20

Go = Callable[[], Awaitable[bool]]
"""What a lane asks between its batches: wait out a rest, then whether to go on."""


@tool(concurrency_safe=True)
def soak_square(n: int) -> int:
    """Square an integer."""
    return n * n


@tool(concurrency_safe=True, rate_limit=RateLimit(5, burst=2, max_wait_ms=1000))
def soak_search(query: str) -> str:
    """Search (a rate-limited stand-in for an external API)."""
    return f"results for {query}"


@tool(concurrency_safe=True)
def soak_local(n: int) -> int:
    """A scope's own tool (the churn lane registers one per scope)."""
    return n


@dataclass
class Book:
    """Every call's outcome, by lane: ok, failed by code, lost; environment operations."""

    ok: Counter[str] = field(default_factory=Counter)
    failed: dict[str, Counter[str]] = field(default_factory=dict)
    lost: Counter[str] = field(default_factory=Counter)
    env: Counter[str] = field(default_factory=Counter)
    raised: list[str] = field(default_factory=list)

    def batch(self, lane: str, calls: Sequence[ToolCall], out: ToolBatchResult) -> None:
        """Book a batch's results: one per call, by id (a missing or extra one is lost)."""
        ids = [c.id for c in calls]
        got = [r.call_id for r in out.results]
        if got != ids:
            self.lost[lane] += len(set(ids) ^ set(got)) or len(ids)
            self.note(f"{lane}: results {got} for calls {ids}")
        for item in out.results:
            result = item.result
            if not result.is_error:
                self.ok[lane] += 1
                continue
            info = result.error.info
            self.failed.setdefault(lane, Counter())[info.code if info else "NO_CODE"] += 1

    def crashed(self, lane: str, calls: Sequence[ToolCall], err: BaseException) -> None:
        """A batch that raised: every call of it went without a result."""
        self.lost[lane] += len(calls)
        self.note(f"{lane}: {type(err).__name__}: {str(err)[:200]}")

    def note(self, what: str) -> None:
        """What went wrong, for the record (and the log, as it happens)."""
        self.raised.append(what)
        print(f"SOAK {time.strftime('%H:%M:%S')} {what}", file=sys.stderr, flush=True)

    def snapshot(self) -> Json:
        """The counters so far (JSON)."""
        failed = {lane: dict(c) for lane, c in sorted(self.failed.items())}
        unexpected = sum(
            n
            for lane, codes in self.failed.items()
            for code, n in codes.items()
            if code not in EXPECTED[lane]
        )
        total_failed = sum(sum(c.values()) for c in self.failed.values())
        return {
            "calls": sum(self.ok.values()) + total_failed + sum(self.lost.values()),
            "ok": sum(self.ok.values()),
            "failed": total_failed,
            "lost": sum(self.lost.values()),
            "unexpected": unexpected,
            "ok_by_lane": dict(sorted(self.ok.items())),
            "failed_by_lane": failed,
            "lost_by_lane": dict(sorted(self.lost.items())),
            "env": dict(sorted(self.env.items())),
            "raised": list(self.raised[:50]),
        }


def register(rt: RayRuntime) -> None:
    """The load's tools and environment, registered once for the namespace."""
    env, bump = tally_kit(False)
    TimeoutPolicy().install(rt.registry)  # each tool's timeout_ms: a hung body is killed
    rt.registry.register_environment(env)
    for definition in (bump, rollout_tool(_PLAN), soak_square, soak_search):
        rt.registry.register(definition)


async def _run(rt: RayRuntime, book: Book, lane: str, scope: str, calls: list[ToolCall]) -> None:
    batch = ToolBatchInput(calls, AbortController().signal, scope=scope)
    try:
        out = await rt.executor(scope).execute_batch(batch)
    except Exception as err:
        book.crashed(lane, calls, err)
        return
    book.batch(lane, calls, out)


async def _rollout(rt: RayRuntime, book: Book, agent: int, go: Go) -> None:
    rng = random.Random(agent)
    episode = 0
    while await go():
        episode += 1
        key = f"soak-roll-{agent}-{episode}"
        scope = rt.scope(key)
        scope.restrict(deny=["soak_search"])
        for turn in range(_PLAN.turns):
            calls = []
            for c in range(_PLAN.calls_per_turn):
                draw = rng.random()
                kind = "hang" if draw < 0.03 else "crash" if draw < 0.04 else "good"
                ms = _PLAN.median_ms * (0.5 + rng.random())
                args = {"kind": kind, "ms": round(ms, 3), "hang_s": _PLAN.hang_s}
                calls.append(ToolCall(f"{key}-u{turn}-c{c}", "rollout", args))
                book.env[f"rollout_{kind}"] += 1
            await _run(rt, book, "rollout", key, calls)
        scope.dispose()
        book.env["scopes_disposed"] += 1


async def _env(rt: RayRuntime, book: Book, agent: int, go: Go) -> None:
    rng = random.Random(1000 + agent)
    epoch = 0
    while await go():
        epoch += 1
        key = f"soak-env-{agent}-{epoch}"
        tally = Tally(rt, key)
        for _ in range(_ENV_STEPS):
            if not await go():  # a rest waits here: the instance parks meanwhile
                break
            if rng.random() < 0.15:  # idle past park_after_s: the next step restores it
                await asyncio.sleep(3.5 + rng.random())
                status = await rt.executor(key).environment("tally").status()
                book.env["parked_seen" if status.state == "parked" else "idle_not_parked"] += 1
            seen = await tally.step()
            _book_step(book, seen)
        try:
            await rt.executor(key).environment("tally").close()
            book.env["closed"] += 1
        except Exception as err:
            book.env["close_raised"] += 1
            book.note(f"env close: {type(err).__name__}: {str(err)[:200]}")
        rt.scope(key).dispose()
        rt.scope(tally.branch).dispose()  # the scope its forks went to
        await asyncio.sleep(rng.random())


def _book_step(book: Book, seen: dict[str, object]) -> None:
    """One tally step: a bump (and a fork's bump) is a call; a loss or reset is lost."""
    book.env["opened"] += bool(seen.get("opened"))
    if "raised" in seen:
        book.lost["env"] += 1
        book.note(f"env: {seen['raised']}")
    elif "code" in seen:
        book.failed.setdefault("env", Counter())[str(seen["code"])] += 1
    elif seen.get("verdict") == "ok":
        book.ok["env"] += 1
    else:  # a silent reset or a lost update: the state went wrong without a fault
        book.lost["env"] += 1
        book.env[f"verdict_{seen.get('verdict')}"] += 1
        book.note(f"env: {seen}")
    if seen.get("reopened"):
        book.env["lost_instances"] += 1
    if "fork" in seen:
        book.env["forked"] += 1
        book.ok["env"] += seen["fork"] == "ok"
        book.lost["env"] += seen["fork"] != "ok"
        if seen["fork"] != "ok":
            book.note(f"env fork: {seen}")
    elif "fork_code" in seen:
        book.env["forked"] += 1
        book.failed.setdefault("env", Counter())[str(seen["fork_code"])] += 1


async def _code(rt: RayRuntime, book: Book, agent: int, go: Go) -> None:
    key = f"soak-code-{agent}"
    rt.scope(key).present_as("code")
    n = 0
    while await go():
        n += 1
        program = _FAILING if n % 5 == 0 else _PROGRAM
        args = {"code": program, "description": "soak"}
        await _run(rt, book, "code", key, [ToolCall(f"{key}-{n}", "run_code", args)])


async def _rate(rt: RayRuntime, book: Book, agent: int, go: Go) -> None:
    key = f"soak-rate-{agent}"
    n = 0
    while await go():
        n += 1
        calls = [ToolCall(f"{key}-{n}-{i}", "soak_search", {"query": f"q{i}"}) for i in range(8)]
        await _run(rt, book, "rate", key, calls)


async def _churn(rt: RayRuntime, book: Book, agent: int, go: Go) -> None:
    n = 0
    while await go():
        n += 1
        key = f"soak-churn-{agent}-{n}"
        scope = rt.scope(key)
        scope.register(soak_local)
        scope.restrict(deny=["soak_search"])
        rt.registry.schemas(key)
        if n % 5 == 0:
            calls = [ToolCall(f"{key}-{i}", "soak_local", {"n": i}) for i in range(3)]
            await _run(rt, book, "churn", key, calls)
        scope.dispose()
        book.env["scopes_disposed"] += 1
        await asyncio.sleep(0.2)


async def wake(rt: RayRuntime, book: Book, n: int) -> None:
    """After a rest: 12 no-op calls, whose released processes let their workers trim.

    A worker lets its idle call processes (beyond the warm ones) go when it next releases
    one and they have been idle 60 s: a worker that goes quiet keeps them until then.
    """
    key = "soak-wake"
    calls = [ToolCall(f"{key}-{n}-{i}", "soak_square", {"n": i}) for i in range(12)]
    await _run(rt, book, "wake", key, calls)


_LANE = {"rollout": _rollout, "env": _env, "code": _code, "rate": _rate, "churn": _churn}


async def run_lanes(rt: RayRuntime, book: Book, gate: asyncio.Event, stop: asyncio.Event) -> None:
    """Every lane's agents until ``stop`` is set; while ``gate`` is clear they rest.

    An agent looks at both between its batches (a trajectory, an environment step, a
    program): a rest lets every batch in flight end first.
    """

    async def go() -> bool:
        await gate.wait()
        return not stop.is_set()

    await asyncio.gather(
        *(_LANE[lane](rt, book, agent, go) for lane, n in LANES.items() for agent in range(n))
    )
