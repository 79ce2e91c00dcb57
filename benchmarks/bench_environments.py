"""Environments: every target of the environments page, each beside its reference.

Run: ``.venv/bin/python benchmarks/bench_environments.py [--quick] [--no-write]``. It starts
a local Ray from ``configs/local.toml`` and measures with ``toolray bench --environments``'s
code (``toolray_actors.bench._env_bench``; each part on a sharded namespace of its own),
then writes ``benchmarks/RESULTS-environments.md`` and ``benchmarks/environments.json``:

- a call of an environment's tool against the same stateless call (one-call batches,
  interleaved), p50 and the ratio;
- ``open()`` of a warm definition, p50 (the previous instance closed between rounds);
- ``fork="process"`` of a 50 MB state against a 1 KB state, p50 (and a ``"snapshot"``
  fork of the 50 MB state for comparison);
- 1,000 open instances of a 100 KB state: the machine's added memory and the instance
  processes' PSS;
- 10,000 instances with parking (``park_after_s = 1``), opened in waves: the peak PSS of
  every toolray process meanwhile, then every state read back and checked;
- a stateful multi-turn replay of 200 trajectories with forks against plain Python.

``--quick``: 60 rounds, 6 forks, 200 instances, 1,000 parked, 40 trajectories.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from toolray_actors import RayRuntime, load_config
from toolray_actors.bench._env_bench import EnvOptions, run_environments
from toolray_actors.cli._env_cli import env_rows

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "RESULTS-environments.md"
JSON = HERE / "environments.json"
CONFIG = HERE.parent / "configs" / "local.toml"
QUICK = "--quick" in sys.argv


def options() -> EnvOptions:
    """What one run measures."""
    if QUICK:
        return EnvOptions(rounds=60, forks=6, instances=200, parked=1000, replay_scopes=40)
    return EnvOptions()


def write(report: dict[str, object], load: tuple[float, float]) -> None:
    """``RESULTS-environments.md``: one row per figure, with its reference and verdict."""
    machine = report["machine"]
    assert isinstance(machine, dict)
    rows = env_rows(report)
    text = [
        "# Environments (`benchmarks/bench_environments.py`)",
        "",
        f"`benchmarks/bench_environments.py{' --quick' if QUICK else ''}`: one run, "
        f"{report['seconds']:.0f} s, {report['date']}; a local Ray from `configs/local.toml`; "
        f"nproc {machine['nproc']}, Python {machine['python']}, Ray {machine['ray']}; "
        f"1-minute load average {load[0]:.1f} at the start, {load[1]:.1f} at the end (other "
        "sessions may share the machine). Each part runs on a sharded namespace of its own "
        '(2 shards, the default pool: `isolation="call"`, an instance per process).',
        "",
        "| figure | measured | reference / target | result | met |",
        "|---|---:|---|---|---|",
        *(
            f"| {what} | {measured} | {target} | {verdict} | "
            f"{'—' if met is None else ('yes' if met else '**no**')} |"
            for what, measured, target, verdict, met in rows
        ),
        "",
        "Every figure of the run is in `benchmarks/environments.json`.",
    ]
    RESULTS.write_text("\n".join(text) + "\n", encoding="utf-8")
    JSON.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    load = os.getloadavg()[0]
    base = load_config(str(CONFIG))
    cfg = base.model_copy(update={"namespace": f"{base.namespace}-envbench", "detached": False})
    runtime = RayRuntime.start(cfg, address=cfg.address or "local")
    started = time.perf_counter()
    try:
        report = run_environments(runtime, options(), say=lambda what: print(f"  {what}"))
    finally:
        runtime.shutdown()
    for row in env_rows(report):
        print(" | ".join(str(cell) for cell in row))
    print(f"{time.perf_counter() - started:.0f} s")
    if "--no-write" not in sys.argv:
        write(report, (load, os.getloadavg()[0]))
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
