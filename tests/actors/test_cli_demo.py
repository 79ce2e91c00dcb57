"""``toolray demo``'s usage errors (the demo itself: ``tests/packaging/test_wheel.py``, from the
wheel in a fresh venv, checked by ``tests/_demo.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from toolray_actors import RayRuntime
from toolray_actors.cli import main


def test_a_missing_config_is_one_line_and_starts_no_ray(
    capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Any] = []
    monkeypatch.setattr(RayRuntime, "start", lambda *a, **k: started.append(a))
    assert main(["--config", "does-not-exist.toml", "demo"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()
    assert line.startswith("toolray: config file not found: does-not-exist.toml")
    assert started == []
