"""The chaos campaign's invariants, checked from the drivers' records, the ledger and the logs.

Every batch returned one result per call in model order (none raised); no call id ran
twice; every success ran exactly once; every failure carries a fault code; every JSONL log
holds a ``tool/call`` and a ``tool/result`` for every call of every returned batch; and no
collateral damage — a call whose process survived never failed ``WORKER_LOST``.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ("FAULT_CODES", "check")

FAULT_CODES = {"WORKER_LOST", "EXECUTOR_LOST", "ABORTED", "TOOL_TIMEOUT"}


def check(
    records: list[dict[str, Any]], ledger: str, logs: Path, killed: set[int] | None = None
) -> dict[str, Any]:
    """The invariants over every returned batch, the ledger and the logs.

    ``killed`` holds every pid the campaign killed (with what ran below it then): a call
    that failed ``WORKER_LOST`` after its body started (its pid is in the ledger) must have
    run in one of them — a fault fails only the calls of the process that died.
    """
    db = sqlite3.connect(ledger)
    rows = list(db.execute("SELECT call_id, pid FROM runs"))
    db.close()
    runs = Counter(cid for cid, _ in rows)
    ran_in: dict[str, int] = dict(rows)
    raised = [r for r in records if "raised" in r]
    returned = [r for r in records if "codes" in r]
    misordered = [r for r in returned if r["result_ids"] != r["ids"]]
    codes = Counter(c for r in returned for c in r["codes"])
    successes = [
        cid for r in returned for cid, c in zip(r["ids"], r["codes"], strict=False) if c is None
    ]
    failures = [
        (cid, c) for r in returned for cid, c in zip(r["ids"], r["codes"], strict=False) if c
    ]
    lost = len(raised) + len(misordered) + sum(1 for _, c in failures if c not in FAULT_CODES)
    rerun = sum(1 for n in runs.values() if n > 1)
    collateral = [
        cid
        for cid, code in failures
        if code == "WORKER_LOST" and cid in ran_in and ran_in[cid] not in (killed or set())
    ]
    success_not_once = sum(1 for cid in successes if runs.get(cid) != 1)
    log_problems = 0
    for path in logs.glob("*.jsonl"):
        seen: Counter[tuple[str, str]] = Counter()
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                log_problems += 1
                continue
            seen[(rec["type"], rec["callId"])] += 1
        for r in (r for r in returned if path.stem == r["agent"]):
            for cid in r["ids"]:
                if seen[("tool/call", cid)] != 1 or seen[("tool/result", cid)] != 1:
                    log_problems += 1
    agents = {r["agent"] for r in records}
    recovered = {
        r["agent"]: r["since_stop"]
        for r in records
        if r["phase"] == "recovery" and "codes" in r and not any(r["codes"])
    }
    return {
        "batches": len(records),
        "raised": len(raised),
        "misordered": len(misordered),
        "calls": sum(len(r["ids"]) for r in returned),
        "successes": len(successes),
        "failures_by_code": dict(codes - Counter({None: codes[None]})),
        "lost": lost,
        "re_run": rerun,
        "collateral": len(collateral),
        "success_not_exactly_once": success_not_once,
        "log_problems": log_problems,
        "agents": len(agents),
        "agents_recovered": len(recovered),
        "recovery_s": sorted(recovered.values()),
    }
