"""What ``toolray demo`` must print: every scenario, and what Getting started shows of it.

``tests/packaging/test_wheel.py`` runs the demo as a stranger does (the wheel in a fresh
venv, from an empty directory) and checks its output here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def check_demo(out: str, err: str) -> None:
    """The demo's stdout ``out`` shows every scenario as the docs say; ``err`` is quiet."""
    assert "Traceback" not in out
    # Ray's token-authentication notice of the local Ray the demo starts: the toolray logger's
    # (debug), not the first line of stderr
    assert "Token authentication" not in err
    # 1. a parallel group, an exclusive barrier, and the reads after it
    assert "-- stage 1: parallel group from call 1" in out
    assert "== barrier 2: exclusive, call 4 alone" in out
    assert "-> wrote 20 bytes to PLAN.md" in out
    # 2. a timeout answered by kill-and-replace
    assert "TOOL_TIMEOUT (process killed)" in out  # the call's own process (isolation "call")
    assert "reason: the call's process was terminated" in out
    assert "kills 0 -> 1, replacements 0 -> 0, child_replacements 0 -> 1" in out
    # 3. a user cancellation
    assert out.count(" ABORTED ") >= 2
    assert "ABORTED_BEFORE_DISPATCH" in out
    assert "!! abort at" in out
    # 4. a worker crash: one WORKER_LOST, its siblings fine
    crash = out.split("=== 4.")[1].split("=== 5.")[0]
    rows = [line for line in crash.splitlines() if line.endswith(("  ok", "  WORKER_LOST"))]
    assert len(rows) == 5  # the timeline: one row per call
    assert sorted(re.findall(r"^  c\d\s+(\S+)", crash, re.M)) == ["WORKER_LOST"] + ["ok"] * 4
    assert "workers_lost 0 -> 1" in crash
    # 5. a scope hiding a tool
    assert "hidden in the scope: write_file" in out
    assert 'UNKNOWN_TOOL             -> Error: unknown tool "write_file"' in out
    # 6. Code Mode: one run_code program, its sub-calls nested under it
    code = out.split("=== 6.")[1].split("=== 7.")[0]
    assert "    async def read_file(path: str) -> Any:" in code
    assert code.count("  +-  ") == 4
    assert re.search(r"-> read 4 lines, found \d TODO\(s\)", code)
    assert "event log: 4 tool/ptc-dispatch records" in code
    # 7. environments: an instance per trajectory, a fork, rewards, one loss said loudly
    env = out.split("=== 7.")[1]
    pids = re.findall(r"opened \(open\), its process (\d+)", env)
    assert len(set(pids)) == 2
    assert "rewards (traj-a, its branch, traj-b): [1.0, 0.0, 0.0]" in env
    assert "traj-b crashes its instance: ENVIRONMENT_LOST" in env
    assert "traj-b's next call: ENVIRONMENT_LOST" in env
    assert f"(edit 2, pid {pids[0]})" in env  # traj-a's instance untouched by the crash
    assert "instances open: 3, lost so far: 1" in env
    assert "Ray shut down" in out
    # what Getting started shows of the demo is what it prints (timings and ids aside)
    shown = (ROOT / "docs" / "assets" / "demo.txt").read_text(encoding="utf-8")
    assert shown.startswith("$ toolray demo\n")
    assert _shape(shown) == _shape(out), "run: .venv/bin/python scripts/gen_docs.py --demo"


def _shape(output: str) -> list[str]:
    """The demo's lines with every number and bar made alike (they change run to run)."""
    lines = []
    for line in output.splitlines():
        if line.startswith("$ "):
            continue
        if line.lstrip().startswith("confinement "):  # the layers this machine's kernel has
            line = "confinement …"
        line = re.sub(r"\|[#.]+\|", "|bar|", line)
        lines.append(" ".join(re.sub(r"\d+(\.\d+)?", "N", line).split()))
    return lines
