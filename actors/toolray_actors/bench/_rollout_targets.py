"""toolray's targets on the rollout plan of ``toolray bench --rollout``, met or not.

Printed after the table (and written with the benchmark's results): every good call
succeeds; each faulty call fails alone, with its code; no call goes without a result and
nothing is left running; turn p99 ≤ ``timeout_ms + kill_grace_ms + 150 ms``; calls/s ≥ 90 %
of the plan's kill-first bound (the most any backend that kills a hung call before
answering it can reach); and, when the ``gather`` pattern ran in the same run, calls/s ≥
its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._rollout_plan import BackendReport, RolloutPlan, codes_text

__all__ = ("THROUGHPUT_SHARE", "Target", "targets", "targets_text")

THROUGHPUT_SHARE = 0.9
"""toolray's throughput target: this share of the plan's kill-first bound."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One of toolray's targets on the plan, and whether the run met it."""

    what: str
    met: bool
    measured: str

    def __str__(self) -> str:
        return f"{'PASS' if self.met else 'FAIL'} {self.what}: {self.measured}"


def targets(reports: Sequence[BackendReport], plan: RolloutPlan) -> list[Target]:
    """Toolray's targets (default pools, ``"call"``), met or not; none if it did not run.

    Every good call succeeds; each faulty call fails alone, with its code; no call goes
    without a result and nothing is left running; turn p99 ≤ timeout + kill grace +
    150 ms; calls/s ≥ 90 % of the plan's kill-first bound; and, when the ``gather`` pattern
    ran too, calls/s ≥ its own.
    """
    by = {r.backend: r for r in reports}
    ours = by.get("toolray")
    if ours is None:
        return []
    bound, p99 = plan.kill_first_bound, ours.turn_p99_ms
    alone = sum(ours.faulty_failed.values()) == ours.faulty and not ours.good_failed
    made = [
        Target(
            what="every good call succeeded",
            met=ours.good_ok == ours.good,
            measured=f"{ours.good_ok} of {ours.good}",
        ),
        Target(
            what="each faulty call failed alone with its code",
            met=alone,
            measured=f"faulty: {codes_text(ours.faulty_failed)}; "
            f"good: {codes_text(ours.good_failed)}",
        ),
        Target(
            what="no call without a result", met=not ours.no_result, measured=str(ours.no_result)
        ),
        Target(
            what="nothing left running", met=not ours.left_running, measured=str(ours.left_running)
        ),
        Target(
            what=f"turn p99 ≤ timeout + kill grace + 150 ms = {plan.turn_p99_target_ms:g} ms",
            met=p99 <= plan.turn_p99_target_ms,
            measured=f"{p99:.0f} ms",
        ),
        Target(
            what=f"calls/s ≥ {THROUGHPUT_SHARE:.0%} of the kill-first bound ({bound:.0f})",
            met=ours.calls_per_s >= THROUGHPUT_SHARE * bound,
            measured=f"{ours.calls_per_s:.0f} = {ours.calls_per_s / bound:.0%} of the bound",
        ),
    ]
    gather = by.get("gather")
    if gather is not None:
        ratio = ours.calls_per_s / gather.calls_per_s if gather.calls_per_s else math.inf
        made.append(
            Target(
                what="calls/s ≥ the gather pattern's (64 threads)",
                met=ours.calls_per_s >= gather.calls_per_s,
                measured=f"{ours.calls_per_s:.0f} vs {gather.calls_per_s:.0f} = {ratio:.2f}×",
            )
        )
    return made


def targets_text(reports: Sequence[BackendReport], plan: RolloutPlan) -> str:
    """The targets as Markdown lines (empty when toolray did not run)."""
    checks = targets(reports, plan)
    if not checks:
        return ""
    return "\n".join(["toolray's targets (default pools):", *(f"- {c}" for c in checks)])
