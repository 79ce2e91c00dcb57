"""Two source trees side by side: the Ray throughput figure before and after a change.

Run: ``.venv/bin/python benchmarks/compare_trees.py BEFORE AFTER [--rounds N] [--out PATH]``
where BEFORE and AFTER are checkouts of this repository (``git archive REV | tar -x -C DIR``).
Each round runs, for each isolation mode (``shared``, ``call``), one child process per tree,
in alternating order, each importing its own tree (``PYTHONPATH``; the local Ray it starts
hands that path to its workers). A child starts a local Ray from ``configs/local.toml``
with the mode asked for and measures 1,000 no-op safe calls in one batch, cap 1,000, against
raw Ray doing the same fan-out (``toolray bench``'s rows, interleaved inside the child,
median of ``--repetitions``). The table gives, per tree and mode, the medians over the
rounds of the throughput ratio and of both throughputs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MODES = ("shared", "call")
CONFIG = Path(__file__).resolve().parent.parent / "configs" / "local.toml"


async def _measure(isolation: str, repetitions: int) -> dict[str, Any]:
    import toolray_actors
    from toolray_actors import RayRuntime, load_config
    from toolray_actors.bench._rawray import GroupShape
    from toolray_actors.cli._bench import BenchOptions, bench_rows

    base = load_config(str(CONFIG))
    cfg = base.model_copy(
        update={
            "namespace": f"compare-{os.getpid()}",
            "detached": False,
            "pool": base.pool.model_copy(update={"isolation": isolation}),
        }
    )
    rt = await asyncio.to_thread(RayRuntime.start, cfg, address="local")
    try:
        opts = BenchOptions(
            calls=1000, shapes=(GroupShape.parse("safe"),), cap=1000, repetitions=repetitions
        )
        (row,) = await bench_rows(rt, opts)
    finally:
        await asyncio.to_thread(rt.shutdown)
    here = await asyncio.to_thread(Path(toolray_actors.__file__).resolve)
    return {
        "tree": str(here.parents[2]),
        "ratio": row["ratio"],
        "toolray": row["toolray"]["calls_per_s"],
        "raw": row["raw"]["calls_per_s"],
    }


def _child(tree: Path, isolation: str, repetitions: int) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree / "actors")])
    command = [
        sys.executable,
        __file__,
        "--child",
        isolation,
        "--repetitions",
        str(repetitions),
    ]
    done = subprocess.run(command, env=env, cwd=tree, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the child for {tree} ({isolation}) failed:\n{done.stderr[-4000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if Path(found["tree"]) != tree.resolve():
        raise RuntimeError(f"the child imported {found['tree']}, not {tree}")
    return found


def _table(runs: dict[tuple[str, str], list[dict[str, Any]]], names: dict[str, str]) -> str:
    lines = [
        "| isolation | tree | toolray / raw Ray (median) | toolray calls/s | raw Ray calls/s "
        "| ratios per round |",
        "|---|---|---:|---:|---:|---|",
    ]
    for mode in MODES:
        for label in ("before", "after"):
            rows = runs[(mode, label)]
            ratios = [r["ratio"] for r in rows]
            lines.append(
                f"| {mode} | {label} ({names[label]}) | {statistics.median(ratios):.2f}× "
                f"| {statistics.median(r['toolray'] for r in rows):,.0f} "
                f"| {statistics.median(r['raw'] for r in rows):,.0f} "
                f"| {', '.join(f'{x:.2f}' for x in ratios)} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, nargs="?")
    parser.add_argument("after", type=Path, nargs="?")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--before-name", default="before")
    parser.add_argument("--after-name", default="after")
    parser.add_argument("--out", type=Path, default=None, help="write the table (Markdown)")
    parser.add_argument("--child", choices=MODES, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(asyncio.run(_measure(args.child, args.repetitions))), flush=True)
        return
    if args.before is None or args.after is None:
        parser.error("BEFORE and AFTER are required")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    names = {"before": args.before_name, "after": args.after_name}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {
        (m, label): [] for m in MODES for label in trees
    }
    started = time.monotonic()
    load = os.getloadavg()[0]
    for round_ in range(args.rounds):
        order = ("before", "after") if round_ % 2 == 0 else ("after", "before")
        for mode in MODES:
            for label in order:
                found = _child(trees[label], mode, args.repetitions)
                runs[(mode, label)].append(found)
                print(f"round {round_ + 1} {mode} {label}: {found['ratio']:.2f}×", flush=True)
    text = (
        f"{_table(runs, names)}\n\n{args.rounds} rounds, each tree and mode in its own local Ray "
        f"(alternating order), {args.repetitions} timed batches per child; "
        f"{time.monotonic() - started:.0f} s in all; 1-minute load {load:.1f} → "
        f"{os.getloadavg()[0]:.1f}.\n"
    )
    print(text)
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
