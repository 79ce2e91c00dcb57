"""The benchmarks table's verdicts and its chart (``benchmarks/run_all.py``).

Each row with a target is judged met or missed from its own cells; a row that misses its
target must say why (a note on its ``Headline``), and only such a row may; the chart draws
one bar per judged row, and ``--compose --chart PATH`` — the README's command — writes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests._scripts import load_script
from tests.docs._snippets import ROOT

RUN_ALL: Any = load_script(ROOT / "benchmarks" / "run_all.py", "_chart_run_all")


@pytest.mark.parametrize(
    ("measured", "target", "versus", "met"),
    [
        ("39.8× faster", "≥ 5× faster", "", True),
        ("0.51× of its time", "≤ 1.5×", "", True),
        ("20.09 µs", "≤ 25 µs", "", True),
        ("26.09 µs", "≤ 25 µs", "", False),
        ("105.6 ms", "105.0 ms", "", False),  # a bare number is an upper bound
        ("104.9 ms", "105.0 ms", "", True),
        ("1.82 s", "≤ 15 s", "", True),
        ("796 MB", "≤ 1 GB", "", True),  # units are compared, not digits
        ("1,796 MB", "≤ 1 GB", "", False),
        ("2.2 / 4.0 ms", "≤ 30 ms", "", True),  # every value must meet it
        ("2.2 / 40.0 ms", "≤ 30 ms", "", False),
        ("131 ms / 505 ms", "p99 ≤ 600 ms", "", True),  # "p99" is no number
        ("514.5 ms", "≤ 600 ms, what was killed replaced", "", True),
        ("none", "0", "", True),
        ("3 WORKER_LOST", "0", "", False),
        ("334", "≥ the gather pattern's", "406", False),
        ("450", "≥ the gather pattern's", "406", True),
        ("0.05 µs", "≤ 2 % of a call", "20.09 µs", True),
        ("1.05 µs", "≤ 2 % of a call", "20.09 µs", False),
        ("98.6 MB", "reported", "", None),
        ("1.82 s", "—", "", None),
        ("not measured", "≤ 15 s", "", None),
    ],
)
def test_a_verdict_reads_the_target_as_written(
    measured: str, target: str, versus: str, met: bool | None
) -> None:
    got, ratio = RUN_ALL.verdict(measured, target, versus)
    assert got is met
    if met is not None:
        assert (ratio <= 1) is met  # the chart's side of the line says the same


def test_every_miss_says_why_and_only_a_miss_does() -> None:
    rows = RUN_ALL.rows()
    missed = [r.headline.figure for r in rows if r.met is False]
    noted = [r.headline.figure for r in rows if r.headline.note]
    assert missed == noted, "add (or remove) the note of a Headline in benchmarks/run_all.py"
    judged = [r for r in rows if r.met is not None]
    assert len(judged) >= 30  # most rows have a target that can be read
    text = RUN_ALL.compose()
    assert text.count("**no** ¹") == len(missed)
    assert "NOT EXPLAINED" not in text


def test_the_verdicts_agree_with_the_detailed_files_own() -> None:
    """Where a detailed table judged its own row, the headline's verdict is the same."""
    by_figure = {r.headline.figure: r for r in RUN_ALL.rows()}
    batch = by_figure["in-process batch, 100 × 10 ms safe calls, cap 10"]
    assert "MISS" in _detailed_row(batch.headline)
    assert batch.met is False
    ray_b = by_figure["Ray: 64 × 100 ms sleeps on 8 workers, wall"]
    assert "**NO**" in _detailed_row(ray_b.headline)
    assert ray_b.met is False
    rollout = (ROOT / "benchmarks" / "RESULTS-rollout.md").read_text(encoding="utf-8")
    own = next(x for x in rollout.splitlines() if "calls/s ≥ 90% of the kill-first bound" in x)
    ours = by_figure['rollout 24 × 4 × 4 (4 % faulty), isolation "call": calls/s']
    assert ours.met is own.startswith("- PASS"), (own, ours)


def _detailed_row(headline: Any) -> str:
    lines = (ROOT / "benchmarks" / headline.source).read_text(encoding="utf-8").splitlines()
    return next(line for line in lines if line.startswith(headline.row))


def test_the_readmes_chart_command_writes_the_chart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(RUN_ALL, "OUT", tmp_path / "RESULTS.md")  # the repository's stays
    chart = tmp_path / "out" / "results.svg"  # a folder that does not exist yet
    assert RUN_ALL.main(["--compose", "--chart", str(chart)]) == 0
    assert (tmp_path / "RESULTS.md").read_text(encoding="utf-8") == RUN_ALL.compose()
    svg = chart.read_text(encoding="utf-8")
    judged = [r for r in RUN_ALL.rows() if r.met is not None]
    met = sum(1 for r in judged if r.met)
    assert f"{met} of {len(judged)} targets met" in svg
    assert svg.count("MISSED") == len(judged) - met
    assert f"wrote {chart}" in capsys.readouterr().out
