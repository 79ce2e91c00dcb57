"""``toolray bench``'s report: the machine it ran on, the table, the plot (pure)."""

from __future__ import annotations

import importlib.util
import os
import platform
from pathlib import Path
from typing import Any

__all__ = ("check_outputs", "machine", "plot", "table")


def machine() -> dict[str, Any]:
    """The machine and versions the figures come from."""
    import ray

    return {
        "platform": platform.platform(),
        "nproc": os.cpu_count(),
        "python": platform.python_version(),
        "ray": ray.__version__,
    }


def check_outputs(json_path: Path | None, png_path: Path | None) -> None:
    """Before anything is measured: the outputs can be written, and ``--png`` can be drawn."""
    from ._errors import CommandError

    for flag, path in (("--json", json_path), ("--png", png_path)):
        if path is not None and not path.resolve().parent.is_dir():
            raise CommandError(f"{flag}: the directory of {path} does not exist")
    if png_path is not None and importlib.util.find_spec("matplotlib") is None:
        raise CommandError(
            '--png needs matplotlib, which is not installed: pip install "toolray[docs]" '
            "(or matplotlib)"
        )


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def table(report: dict[str, Any]) -> Any:
    """A rich table of the report."""
    from rich.table import Table

    opts = report["options"]
    out = Table(
        title=f"toolray vs raw Ray — {opts['body']} bodies, cap per row, "
        f"median of {opts['repetitions']} run(s)",
        caption="(chain): toolray sent the batch to one worker at once; its per-call latency "
        "includes each call's wait for its turn",
    )
    for name in ("workers", "shape", "calls", "cap", "toolray calls/s", "raw calls/s"):
        out.add_column(name, justify="right")
    out.add_column("ratio", justify="right", style="bold")
    for name in ("toolray p50/p95 ms", "raw p50/p95 ms"):
        out.add_column(name, justify="right")
    for r in report["results"]:
        ours, raw = r["toolray"], r["raw"]
        out.add_row(
            str(r["workers"]),
            f"{r['shape']} (chain)" if r.get("chained") else r["shape"],
            str(r["calls"]),
            str(r["cap"]),
            f"{ours['calls_per_s']:,.0f}",
            f"{raw['calls_per_s']:,.0f}",
            f"{r['ratio']:.2f}×",
            f"{_ms(ours['p50_ms'])} / {_ms(ours['p95_ms'])}",
            f"{_ms(raw['p50_ms'])} / {_ms(raw['p95_ms'])}",
        )
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    """Throughput (toolray and raw) and their ratio, by group shape or by worker count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["results"]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    workers = list(dict.fromkeys(r["workers"] for r in rows))
    by_workers = len(shapes) == 1 and len(workers) > 1
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = (
        [(s, [r for r in rows if r["shape"] == s]) for s in shapes]
        if by_workers
        else [
            (f"{w} worker{'s' if w != 1 else ''}", [r for r in rows if r["workers"] == w])
            for w in workers
        ]
    )
    for label, group in series:
        xs = [
            str(r["workers"] if by_workers else f"{r['shape']}\n(group {r['group_size']})")
            for r in group
        ]
        (line,) = left.plot(
            xs, [r["toolray"]["calls_per_s"] for r in group], "o-", label=f"toolray, {label}"
        )
        left.plot(
            xs,
            [r["raw"]["calls_per_s"] for r in group],
            "s--",
            color=line.get_color(),
            label=f"raw Ray, {label}",
        )
        right.plot(xs, [r["ratio"] for r in group], "o-", color=line.get_color(), label=label)
    xlabel = "worker actors" if by_workers else "group shape"
    left.set(title="throughput", xlabel=xlabel, ylabel="calls/s")
    right.axhline(1.0, color="grey", linewidth=0.8)
    right.set(title="toolray / raw Ray", xlabel=xlabel, ylabel="ratio", ylim=(0, None))
    left.legend(fontsize=8)
    right.legend(fontsize=8)
    m = report["machine"]
    fig.suptitle(
        f"toolray bench — {report['options']['body']} bodies; nproc {m['nproc']}, "
        f"Python {m['python']}, Ray {m['ray']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------- the command
