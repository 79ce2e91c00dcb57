"""The edges of the ``toolray`` command a new user hits first (no Ray started here)."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

import toolray
from toolray_actors.cli import COMMANDS, main, parser

ROOT = Path(__file__).resolve().parents[2]


def _no_ray_start(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    from toolray_actors import RayRuntime

    started: list[Any] = []
    monkeypatch.setattr(RayRuntime, "start", lambda *a, **k: started.append(a))
    return started


def test_version_prints_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"toolray {toolray.__version__}\n"
    assert toolray.__version__ == version("toolray")


def test_toolray_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:  # a bare `toolray` is test_cli_errors.py's
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: toolray")
    for command in COMMANDS:
        assert f"    {command.name} " in out
    assert "exit codes:" in out


@pytest.mark.parametrize(
    "argv",
    [["--config", "ci", "demo"], ["demo", "--config", "ci"], ["trace", "--config", "ci"]],
)
def test_config_is_accepted_before_or_after_the_command(argv: list[str]) -> None:
    assert parser().parse_args(argv).config == "ci"
    assert parser().parse_args([argv[-1] if argv[0] == "--config" else argv[0]]).config is None


def test_the_config_after_the_command_wins() -> None:
    assert parser().parse_args(["--config", "local", "demo", "--config", "ci"]).config == "ci"


@pytest.mark.parametrize("command", [["demo"], ["bench"], ["chaos"], ["trace", "--in-process"]])
@pytest.mark.parametrize("before", [True, False])
def test_a_missing_config_file_exits_2_naming_it(
    command: list[str],
    before: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started = _no_ray_start(monkeypatch)
    missing = str(tmp_path / "nope.toml")
    argv = ["--config", missing, *command] if before else [*command, "--config", missing]
    assert main(argv) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.startswith(f"toolray: config file not found: {missing}")
    assert captured.out == ""
    assert started == []


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    top = parser()
    (action,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_every_flag_has_help_and_every_command_documents_its_exit_codes(name: str) -> None:
    command = _subparsers()[name]
    for action in command._actions:
        assert action.help, (name, action.option_strings)
        assert action.help != argparse.SUPPRESS, (name, action.option_strings)
    text = command.format_help()
    assert "exit codes:\n  0  " in text
    assert "\n  2  a usage or setup error" in text
    assert "--config NAME|PATH" in text


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        (
            "workers",
            "--kinds: unknown kind 'workers' (choose from child, instance, worker, executor,",
        ),
        ("worker,nodes", "--kinds: unknown kind 'nodes'"),
        ("node", "--kinds node needs worker nodes to remove: pass --nodes N"),
    ],
)
def test_chaos_checks_its_kinds_before_starting_anything(
    kinds: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolray_actors.cli import _chaos

    monkeypatch.setattr(_chaos, "Proc", lambda *a, **k: pytest.fail("a process started"))
    assert main(["chaos", "--kinds", kinds]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert message in line


def test_chaos_kinds_default_to_all_but_node_unless_there_are_nodes() -> None:
    from toolray_actors.cli._chaos import kinds_of

    args = parser().parse_args(["chaos"])
    assert kinds_of(args) == [
        "child",
        "instance",
        "worker",
        "executor",
        "pool",
        "registry",
        "bucket",
    ]
    args = parser().parse_args(["chaos", "--nodes", "2"])
    assert kinds_of(args)[-1] == "node"
    assert kinds_of(parser().parse_args(["chaos", "--kinds", ""])) == []


def test_demo_rows_keep_two_spaces_between_columns() -> None:
    from toolray_actors.cli._timeline import render_timeline

    span = {"type": "call", "callId": "c1", "name": "read_file", "started": 0.0}
    trace = [
        {**span, "index": 0, "worker": "w1.542214", "mode": "parallel", "settled": 0.1},
        {**span, "index": 1, "worker": "w12.5422140", "mode": "exclusive", "settled": 0.2},
    ]
    header, first, second = render_timeline(trace)
    assert "w1.542214    parallel" in first
    assert "w12.5422140  exclusive" in second
    assert header.split()[:7] == ["#", "call", "tool", "worker", "mode", "start", "end"]
    for row in (first, second):  # nine cells, each apart from the next by two spaces or more
        cells = re.split(r" {2,}", row.strip())
        assert cells[:5] == [row.split()[0], "c1", "read_file", row.split()[3], row.split()[4]]
        assert len(cells) == 9


NO_RAY = """
import json, sys
sys.modules["ray"] = None  # as if Ray were not installed: every import of it fails
from toolray_actors.cli import main
imported = "ray" in sys.modules and sys.modules["ray"] is not None
out = {}
for argv in (["demo"], ["bench"], ["chaos"], ["trace"], ["--config", "ci", "demo"]):
    out[" ".join(argv)] = main(argv)
out["in-process"] = main(["trace", "--in-process", "--out", sys.argv[1]])
print("RESULT", json.dumps({"codes": out, "imported_ray": imported}))
"""


def test_without_ray_every_ray_command_is_one_line_and_exit_2(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", NO_RAY, str(tmp_path / "t.json")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (result,) = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    got = json.loads(result[len("RESULT ") :])
    assert got["imported_ray"] is False
    codes = got["codes"]
    assert codes.pop("in-process") == 0  # trace --in-process needs no Ray
    assert set(codes.values()) == {2}
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == len(codes)  # one line per command, nothing else
    for line in errors:
        assert line.startswith("toolray: this needs Ray, which is not installed")
        assert line.endswith('pip install "toolray[ray]"')
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
