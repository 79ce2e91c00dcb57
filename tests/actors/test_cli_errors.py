"""One error style for every ``toolray`` command: ``toolray: <message>``, exit 2, one line.

No exception class name, no usage screen for a bad value, nothing started before the
mistake is found. Ray is never started here.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from toolray_actors.cli import COMMANDS, main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_ray_start(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolray_actors import RayRuntime

    def start(*args: Any, **kwargs: Any) -> Any:
        pytest.fail("a command started Ray before finding the mistake")

    monkeypatch.setattr(RayRuntime, "start", start)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("toolray: ")
    assert "Error:" not in line  # no exception class name (ValueError:, StartError:, …)
    return line


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's own mistakes end here
        return int(exit_.code or 0)


def test_a_bare_toolray_prints_its_usage_on_stderr_and_exits_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    usage, line = captured.err.strip().splitlines()
    assert usage.startswith("usage: toolray ")
    assert line == (
        "toolray: choose a command: demo, bench, trace, top, serve, chaos (toolray --help says "
        "what each does)"
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["chaos", "--kinds", "nonsense"],
            "toolray: --kinds: unknown kind 'nonsense' (choose from child, instance, worker, "
            "executor, pool, registry, bucket, node)",
        ),
        (["bench", "--calls", "0"], "toolray: --calls and --repetitions must be at least 1"),
        (
            ["bench", "--scopes", "banana"],
            "toolray: bench --scopes: expected N or N,M,…: 'banana' (toolray bench --help "
            "lists the options)",
        ),
        (
            ["bench", "--body", "fast"],
            "toolray: bench --body: invalid choice: 'fast' (choose from 'noop', 'sleep', 'cpu') "
            "(toolray bench --help lists the options)",
        ),
        (
            ["demo", "--nope"],
            "toolray: demo: unrecognized arguments: --nope (toolray demo --help lists the options)",
        ),
        (
            ["dmeo"],
            "toolray: unknown command 'dmeo' (choose from demo, bench, trace, top, serve, chaos) "
            "(toolray --help lists the options)",
        ),
        (
            ["top", "--interval", "0"],
            "toolray: top --interval: the interval must be positive, not 0 (toolray top --help "
            "lists the options)",
        ),
    ],
)
def test_each_mistake_is_one_line_and_exit_2(
    argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code(argv) == 2
    assert _one_line(capsys) == expected


@pytest.mark.parametrize("name", [c.name for c in COMMANDS])
def test_every_commands_help_shows_its_own_usage(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code([name, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: toolray {name} ")
    assert "exit codes:" in out


def test_an_unexpected_error_is_one_line_without_its_class_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolray_actors.cli import _chaos

    def boom(args: argparse.Namespace) -> int:
        raise KeyError("the ledger")

    monkeypatch.setattr(_chaos, "run", boom)  # parser() takes each command's run from its module
    assert main(["chaos"]) == 2
    assert _one_line(capsys) == "toolray: 'the ledger'"


def test_png_without_matplotlib_fails_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name)
    )
    assert main(["bench", "--png", str(tmp_path / "bench.png")]) == 2
    assert _one_line(capsys) == (
        'toolray: --png needs matplotlib, which is not installed: pip install "toolray[docs]" '
        "(or matplotlib)"
    )
    assert not (tmp_path / "bench.png").exists()


@pytest.mark.parametrize("mode", [["--scopes", "10"], ["--rollout"], ["--environments"]])
def test_png_is_refused_where_it_would_draw_nothing(
    mode: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", *mode, "--png", str(tmp_path / "x.png")]) == 2
    assert _one_line(capsys) == (
        "toolray: --png draws the group-shape benchmark; --scopes, --rollout and --environments "
        "write --json only"
    )


@pytest.mark.parametrize("mode", [[], ["--scopes", "10"], ["--rollout"]])
def test_an_output_in_a_missing_directory_fails_before_anything_runs_in_every_mode(
    mode: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "nowhere" / "bench.json"
    assert main(["bench", *mode, "--json", str(where)]) == 2
    assert _one_line(capsys) == f"toolray: --json: the directory of {where} does not exist"


def test_top_without_a_cluster_says_so_and_hints_at_no_local_ray(tmp_path: Path) -> None:
    """A fresh machine: no RAY_ADDRESS, no ``ray start`` (an empty Ray temporary directory)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TOOLRAY_CONFIG")}
    env["RAY_TMPDIR"] = str(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "toolray", "top", "--once"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("toolray: top watches a running Ray cluster and found none")
    assert "ray start --head" in line
    assert "local" not in line  # top never starts a local Ray: no hint that it could
    assert not (tmp_path / "ray").exists()  # and it did not start one


def test_the_commands_route_rays_token_notice_to_the_toolray_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from toolray_actors.driver._quiet import TOKEN_LOGGER, quiet_notices

    ray_logger = logging.getLogger(TOKEN_LOGGER)
    notice = "Token authentication is enabled for this Ray cluster. Set RAY_AUTH_MODE=..."
    with caplog.at_level(logging.DEBUG):
        with quiet_notices():
            ray_logger.warning(notice)
            ray_logger.warning("another warning of that logger")
        ray_logger.warning(notice)  # outside a command: Ray's own warning, untouched
    seen = [(r.name, r.levelno, r.getMessage()) for r in caplog.records]
    assert seen == [
        ("toolray", logging.DEBUG, f"ray: {notice}"),
        (TOKEN_LOGGER, logging.WARNING, "another warning of that logger"),
        (TOKEN_LOGGER, logging.WARNING, notice),
    ]
    assert ray_logger.filters == []
