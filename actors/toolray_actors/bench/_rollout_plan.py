"""The rollout plan of ``toolray bench --rollout``, its tool body, and what a run comes to.

A plan is N trajectories × M turns × K concurrency-safe calls; each call is drawn once,
from a seeded generator, so every backend runs the very same calls: a log-normal sleep
(median ``median_ms``), or — at ``hang_rate`` — a body that sleeps ``hang_s`` in C and so
ignores its cancellation, or — at ``crash_rate`` — a body that ends its process
(``os._exit``). Pure values and functions, no Ray: the backends live in ``_rollout`` and
``_rollout_peers``.
"""

from __future__ import annotations

import functools
import math
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = (
    "SETTLE_S",
    "BackendReport",
    "CallKind",
    "CallOutcomeRecord",
    "PlannedCall",
    "RolloutPlan",
    "SimulatedCrash",
    "codes_text",
    "percentile",
    "report_of",
    "rollout_body",
    "rollout_tool",
    "table",
)

CallKind = Literal["good", "hang", "crash"]

SETTLE_S = 1.0
"""After the run, every backend waits this long before counting what still runs (a kill
sent as the run ended has landed by then; a hung thread is still sleeping)."""


class SimulatedCrash(RuntimeError):
    """Stands for a crash where one would end the benchmark's own process (in-process peers)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedCall:
    """One call of the plan: where it sits, what it does."""

    trajectory: int
    turn: int
    index: int
    kind: CallKind
    ms: float

    @property
    def call_id(self) -> str:
        """Its id in every backend."""
        return f"t{self.trajectory}-u{self.turn}-c{self.index}"

    def arguments(self, hang_s: float) -> dict[str, Any]:
        """The tool's arguments (JSON)."""
        return {"kind": self.kind, "ms": round(self.ms, 3), "hang_s": hang_s}


@dataclass(frozen=True, slots=True, kw_only=True)
class RolloutPlan:
    """What ``toolray bench --rollout`` runs through every backend."""

    trajectories: int = 24
    turns: int = 4
    calls_per_turn: int = 4
    median_ms: float = 50.0
    sigma: float = 0.5
    hang_rate: float = 0.03
    crash_rate: float = 0.01
    hang_s: float = 60.0
    """How long a hanging body sleeps (longer than the run: it must be stopped)."""
    timeout_ms: float = 400.0
    kill_grace_ms: float = 50.0
    seed: int = 7

    def check(self) -> None:
        """Raise ``ValueError`` for a plan that cannot run."""
        if min(self.trajectories, self.turns, self.calls_per_turn) < 1:
            raise ValueError("--trajectories, --turns and --calls-per-turn must be at least 1")
        if not (0 <= self.hang_rate <= 1 and 0 <= self.crash_rate <= 1):
            raise ValueError("--hang-rate and --crash-rate must be between 0 and 1")
        if self.hang_rate + self.crash_rate > 1:
            raise ValueError("--hang-rate plus --crash-rate must not exceed 1")
        if self.timeout_ms <= 0 or self.kill_grace_ms <= 0 or self.median_ms < 0:
            raise ValueError("--timeout-ms and --kill-grace-ms must be positive")

    def calls(self) -> list[PlannedCall]:
        """Every call, trajectory by trajectory, turn by turn (the same for every backend)."""
        rng = random.Random(self.seed)
        made = []
        for t in range(self.trajectories):
            for u in range(self.turns):
                for c in range(self.calls_per_turn):
                    draw = rng.random()
                    ms = self.median_ms * math.exp(self.sigma * rng.gauss(0.0, 1.0))
                    kind: CallKind = "good"
                    if draw < self.hang_rate:
                        kind = "hang"
                    elif draw < self.hang_rate + self.crash_rate:
                        kind = "crash"
                    made.append(PlannedCall(trajectory=t, turn=u, index=c, kind=kind, ms=ms))
        return made

    def turns_of(self, trajectory: int) -> list[list[PlannedCall]]:
        """The calls of one trajectory, turn by turn (the plan is drawn once, then kept)."""
        return [list(turn) for turn in _schedule(self)[trajectory]]

    def bound_calls_per_s(self, hung_turn_ms: float) -> float:
        """The most calls/s any backend can reach on this plan, zero overhead assumed.

        Trajectories run at once and their turns one after the other, so the run lasts at
        least as long as its slowest trajectory: the sum of its turns' longest calls, where
        a hung call costs ``hung_turn_ms`` (the timeout for a backend that answers it when
        its deadline fires; timeout + kill grace for one that first kills it) and a crash
        nothing.
        """

        def longest(call: PlannedCall) -> float:
            return {"good": call.ms, "hang": hung_turn_ms, "crash": 0.0}[call.kind]

        slowest = max(sum(max(map(longest, turn)) for turn in turns) for turns in _schedule(self))
        calls = self.trajectories * self.turns * self.calls_per_turn
        return calls / (slowest / 1000) if slowest > 0 else math.inf

    @property
    def turn_p99_target_ms(self) -> float:
        """The target for toolray: ``timeout_ms + kill_grace_ms + 150 ms``."""
        return self.timeout_ms + self.kill_grace_ms + 150.0

    @property
    def kill_first_bound(self) -> float:
        """The calls/s bound of a backend that kills a hung call before answering it."""
        return self.bound_calls_per_s(self.timeout_ms + self.kill_grace_ms)


@functools.lru_cache(maxsize=4)
def _schedule(plan: RolloutPlan) -> tuple[tuple[tuple[PlannedCall, ...], ...], ...]:
    """Every trajectory's turns (drawing them is not part of any backend's timed run)."""
    by: list[list[list[PlannedCall]]] = [
        [[] for _ in range(plan.turns)] for _ in range(plan.trajectories)
    ]
    for call in plan.calls():
        by[call.trajectory][call.turn].append(call)
    return tuple(tuple(tuple(turn) for turn in turns) for turns in by)


def _render(args: Any, value: Any) -> list[Any]:
    return [{"type": "text", "text": str(value)}]


def _safe(args: Any) -> bool:
    return True


def rollout_tool(plan: RolloutPlan) -> Any:
    """The plan's tool as a toolray definition (concurrency-safe, ``timeout_ms`` of the plan).

    Its code is pickled by value: a call process unpickling it imports neither this
    package nor Ray (a tool module's imports are what a template pays for, once).
    """
    import cloudpickle

    from toolray import ToolOutput, define_tool

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return define_tool(
        name="rollout",
        description="A rollout tool call: sleeps, hangs or crashes as the plan says",
        parameters={
            "kind": {"type": "string", "required": True},
            "ms": {"type": "number"},
            "hang_s": {"type": "number"},
        },
        output=ToolOutput(schema={"type": "string"}, render=_render),
        execute=rollout_body,
        timeout_ms=plan.timeout_ms,
        is_concurrency_safe=_safe,
    )


def rollout_body(args: Any, ctx: Any = None) -> str:
    """The tool of the plan: sleep ``ms``; or hang ``hang_s`` deaf to cancellation; or crash.

    With ``simulate_crash`` (in-process peers) a crash raises :class:`SimulatedCrash`.
    """
    kind = args["kind"]
    if kind == "crash":
        if args.get("simulate_crash"):
            raise SimulatedCrash("the body would have ended its process")
        os._exit(1)
    if kind == "hang":
        time.sleep(float(args["hang_s"]))  # one C-level sleep: nothing but a kill stops it
        return "hung"
    time.sleep(float(args["ms"]) / 1000)
    return "ok"


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcomeRecord:
    """How one call ended in one backend: ``code`` is ``None`` for a success."""

    kind: CallKind
    code: str | None
    """``None`` (ok), a failure code, or ``"NO_RESULT"`` (the call never got one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BackendReport:
    """What one backend did with the plan."""

    backend: str
    calls: int
    good: int
    good_ok: int
    faulty: int
    faulty_failed: dict[str, int]
    """Codes of the faulty calls that failed (a faulty call that succeeded is a bug)."""
    good_failed: dict[str, int]
    no_result: int
    turn_p50_ms: float
    turn_p99_ms: float
    calls_per_s: float
    wall_s: float
    left_running: int
    """Bodies (threads or processes) still running the plan's tool after the run."""
    threads_alive: int = 0
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values``; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def report_of(
    backend: str,
    outcomes: Iterable[CallOutcomeRecord],
    turn_s: Sequence[float],
    wall_s: float,
    *,
    left_running: int,
    threads_alive: int = 0,
    notes: str = "",
) -> BackendReport:
    """Count what happened to every call; turn latencies in seconds."""
    done = list(outcomes)
    good = [o for o in done if o.kind == "good"]
    faulty = [o for o in done if o.kind != "good"]
    return BackendReport(
        backend=backend,
        calls=len(done),
        good=len(good),
        good_ok=sum(1 for o in good if o.code is None),
        faulty=len(faulty),
        faulty_failed=dict(Counter(o.code for o in faulty if o.code is not None)),
        good_failed=dict(Counter(o.code for o in good if o.code is not None)),
        no_result=sum(1 for o in done if o.code == "NO_RESULT"),
        turn_p50_ms=percentile(turn_s, 0.50) * 1000,
        turn_p99_ms=percentile(turn_s, 0.99) * 1000,
        calls_per_s=len(done) / wall_s if wall_s > 0 else 0.0,
        wall_s=wall_s,
        left_running=left_running,
        threads_alive=threads_alive,
        notes=notes,
    )


def codes_text(counts: dict[str, int]) -> str:
    """``"16 TOOL_TIMEOUT, 7 WORKER_LOST"`` (``-`` for none)."""
    return ", ".join(f"{n} {code}" for code, n in sorted(counts.items())) or "-"


def _row(r: BackendReport) -> str:
    alive = f" ({r.threads_alive} threads alive)" if r.threads_alive else ""
    return (
        f"| {r.backend} | {r.good_ok} of {r.good} | {codes_text(r.faulty_failed)} "
        f"| {codes_text(r.good_failed)} | {r.no_result} "
        f"| {r.turn_p50_ms:.0f} ms / {r.turn_p99_ms:.0f} ms | {r.calls_per_s:.0f} "
        f"| {r.left_running}{alive} |"
    )


def table(reports: Sequence[BackendReport], plan: RolloutPlan) -> str:
    """The side-by-side table (Markdown)."""
    lines = [
        "| backend | good calls ok | faulty calls failed (codes) | good calls failed "
        "| no result | turn p50 / p99 | calls/s | left running |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines.extend(_row(r) for r in reports)
    lines.append(f"| kill-first bound | - | - | - | - | - | {plan.kill_first_bound:.0f} | - |")
    lines.append("")
    lines.append(
        f"Plan: {plan.trajectories} trajectories × {plan.turns} turns × {plan.calls_per_turn} "
        f"calls, bodies log-normal (median {plan.median_ms:g} ms, σ {plan.sigma:g}), "
        f"{plan.hang_rate:.0%} hanging, {plan.crash_rate:.0%} crashing, timeout "
        f"{plan.timeout_ms:g} ms, kill grace {plan.kill_grace_ms:g} ms (seed {plan.seed}); "
        f'toolray\'s turn p99 target {plan.turn_p99_target_ms:g} ms. "left running": bodies '
        f"(threads or processes) still running the plan's tool {SETTLE_S:g} s after the run."
    )
    lines.extend(f"- {r.backend}: {r.notes}" for r in reports if r.notes)
    lines.append(
        f"- bounds (the slowest trajectory's calls alone, no overhead): "
        f"{plan.bound_calls_per_s(plan.timeout_ms):.0f} calls/s for a backend that answers "
        f"a hung call at its deadline and leaves it running; "
        f"{plan.kill_first_bound:.0f} calls/s for one "
        "that kills it first (timeout + kill grace), as toolray does"
    )
    return "\n".join(lines)
