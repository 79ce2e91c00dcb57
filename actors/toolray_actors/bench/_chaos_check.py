"""The chaos campaign's invariants, checked over its records, ledger and event logs (pure).

A call id ends with the kind of its tool (``_chaos_driver.TOOLS``): ``R`` idempotent with
a retry policy, ``L`` rate-limited, ``E`` on an elastic pool, nothing for the plain tool.

Every batch returned one result per call in model order (none raised); no call of a tool
that is not idempotent ran twice, and no such call was retried; every run of an idempotent
call beyond its first has its ``tool/retry`` on the log; every success ran (exactly once,
unless retried); every failure carries a fault code; the rate-limited tool's starts stayed
within its limit plus one burst over every window; every agent recovered; every JSONL log
parses and holds a ``tool/call`` and a ``tool/result`` for every call of every returned
batch. No collateral damage: a call that failed ``WORKER_LOST`` after its body started (its
pid is in the ledger) must have run in a process the campaign killed, or below one (the
ledger keeps each run's ancestors: a worker that its pool's death takes a moment later may
fork a call's process after the kill was aimed) — a fault fails only the calls of the
process that died.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from toolray import RateLimit

__all__ = ("FAULT_CODES", "RATE", "check", "rate_windows_over")

RATE = RateLimit(20, burst=2)
"""The rate-limited ledger tool's limit (the campaign checks it over its start times)."""

FAULT_CODES = {"WORKER_LOST", "EXECUTOR_LOST", "ABORTED", "TOOL_TIMEOUT"}


def rate_windows_over(starts: list[float], per_second: float, burst: int) -> int:
    """Windows (from each start, at least 1 s long) holding more starts than the limit allows.

    The bound is ``per_second × T`` (10 % slack for dispatch jitter) plus *two* bursts: the
    bucket's own, and one more for a bucket actor killed and restarted meanwhile.
    """
    ordered = sorted(starts)
    over = 0
    for i, first in enumerate(ordered):
        for j in range(i, len(ordered)):
            span = max(1.0, ordered[j] - first)
            if j - i + 1 > per_second * span * 1.1 + 2 * burst + 1e-6:
                over += 1
                break
    return over


def _logs(logs: Path, returned: list[dict[str, Any]]) -> tuple[int, Counter[str]]:
    """Log problems (unparsable lines, missing pairs) and the ``tool/retry`` count per call."""
    problems = 0
    retries: Counter[str] = Counter()
    for path in logs.glob("*.jsonl"):
        seen: Counter[tuple[str, str]] = Counter()
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                problems += 1
                continue
            seen[(rec["type"], rec["callId"])] += 1
            if rec["type"] == "tool/retry":
                retries[rec["callId"]] += 1
        for r in (r for r in returned if path.stem == r["agent"]):
            for cid in r["ids"]:
                if seen[("tool/call", cid)] != 1 or seen[("tool/result", cid)] != 1:
                    problems += 1
    return problems, retries


def check(
    records: list[dict[str, Any]], ledger: str, logs: Path, killed: set[int] | None = None
) -> dict[str, Any]:
    """Every invariant of the campaign as a figure (0 where it held).

    ``killed`` holds every pid the campaign killed (with what ran below it then).
    """
    db = sqlite3.connect(ledger)
    rows = list(db.execute("SELECT call_id, pid, at, lineage FROM runs ORDER BY rowid"))
    db.close()
    runs = Counter(cid for cid, _, _, _ in rows)
    ran_in = {  # the last attempt's process and its ancestors
        cid: {pid, *(int(p) for p in (line or "").split())} for cid, pid, _, line in rows
    }
    raised = [r for r in records if "raised" in r]
    returned = [r for r in records if "codes" in r]
    misordered = [r for r in returned if r["result_ids"] != r["ids"]]
    codes = Counter(c for r in returned for c in r["codes"])
    pairs = [(cid, c) for r in returned for cid, c in zip(r["ids"], r["codes"], strict=False)]
    successes = [cid for cid, c in pairs if c is None]
    failures = [(cid, c) for cid, c in pairs if c]
    log_problems, retries = _logs(logs, returned)
    allowed = {cid: 1 + (retries[cid] if cid.endswith("R") else 0) for cid in runs}
    agents = {r["agent"] for r in records}
    recovered = {
        r["agent"]: r["since_stop"]
        for r in records
        if r["phase"] == "recovery" and "codes" in r and not any(r["codes"])
    }
    limited = [at for cid, _, at, _ in rows if cid.endswith("L")]
    collateral = [
        f"{cid} in {sorted(ran_in[cid])}"
        for cid, code in failures
        if code == "WORKER_LOST" and cid in ran_in and not ran_in[cid] & (killed or set())
    ]
    return {
        "batches": len(records),
        "raised": len(raised),
        "misordered": len(misordered),
        "calls": len(pairs),
        "successes": len(successes),
        "failures_by_code": dict(codes - Counter({None: codes[None]})),
        "lost": len(raised) + len(misordered) + sum(1 for _, c in failures if c not in FAULT_CODES),
        "re_run": sum(1 for cid, n in runs.items() if n > 1 and not cid.endswith("R")),
        "collateral": len(collateral),
        "collateral_calls": collateral,
        "success_not_exactly_once": sum(
            1 for cid in successes if not 1 <= runs.get(cid, 0) <= allowed.get(cid, 1)
        ),
        "retries": sum(retries.values()),
        "retries_unrecorded": sum(1 for cid, n in runs.items() if n > allowed[cid]),
        "retried_not_idempotent": sum(1 for cid in retries if not cid.endswith("R")),
        "rate_limited_starts": len(limited),
        "rate_windows_over": rate_windows_over(limited, RATE.per_second, RATE.burst),
        "log_problems": log_problems,
        "agents": len(agents),
        "agents_recovered": len(recovered),
        "recovery_s": sorted(recovered.values()),
    }
